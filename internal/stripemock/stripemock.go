// Package stripemock starts Stripe's own API emulator, stripe-mock
// (github.com/stripe/stripe-mock, real Stripe object shapes from Stripe's
// OpenAPI fixtures), on loopback for a test.
//
// The binary is $PAYHOOK_STRIPE_MOCK, which scripts/test.sh sets after
// installing a pinned version into a cache directory, else stripe-mock on
// the PATH. Without it a test fails under CI (CI set) and skips
// elsewhere: CI must prove what it claims, a developer's quick run need
// not install it.
package stripemock

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// Env names the variable holding the stripe-mock binary's path.
const Env = "PAYHOOK_STRIPE_MOCK"

// listening is the line stripe-mock prints once it serves HTTP.
var listening = regexp.MustCompile(`Listening for HTTP at address: (127\.0\.0\.1:[0-9]+)`)

// Start starts stripe-mock on a free loopback port, HTTP and HTTPS both on
// 127.0.0.1, and returns its HTTP base URL, such as
// "http://127.0.0.1:41234". The process is killed when the test ends. It
// waits for stripe-mock to say it listens, however long its start takes,
// and fails the test if it exits first.
func Start(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(Env)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("stripe-mock"); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("stripemock: %s is not set and no stripe-mock is on the PATH; run the tests with scripts/test.sh, which installs it", Env)
			}
			t.Skipf("stripemock: no stripe-mock (%s unset, none on the PATH); scripts/test.sh installs it", Env)
		}
	}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	out, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatalf("stripemock: start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		w.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	lines := bufio.NewScanner(out)
	var seen []string
	for lines.Scan() {
		if m := listening.FindStringSubmatch(lines.Text()); m != nil {
			go io.Copy(io.Discard, out) // keep draining its log
			return "http://" + m[1]
		}
		seen = append(seen, lines.Text())
	}
	t.Fatalf("stripemock: %s exited before listening: %q", bin, seen)
	return ""
}
