package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider/standard"
)

// TestMain lets a test run this test binary as the payhook binary, so the
// real main, with its signal handling, runs in its own process.
func TestMain(m *testing.M) {
	if os.Getenv("PAYHOOK_TEST_AS_MAIN") == "1" {
		os.Args = append([]string{"payhook"}, strings.Fields(os.Getenv("PAYHOOK_TEST_ARGS"))...)
		main()
		return
	}
	os.Exit(m.Run())
}

// TestSIGTERMFinishesInFlight sends SIGTERM while a delivery is half sent:
// payhook must stop accepting, still store and answer that delivery, and
// exit 0.
func TestSIGTERMFinishesInFlight(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "PAYHOOK_TEST_AS_MAIN=1", "PAYHOOK_TEST_ARGS=serve --addr 127.0.0.1:0", "PAYHOOK_DB="+dbURL,
			"PAYHOOK_UNSAFE_DURABILITY=1") // the test cluster runs with fsync=off
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()

		// serve prints the demo source's URL and secret.
		var addr, secret string
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`--url http://(\S+)/webhooks/demo --secret (\S+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr, secret = m[1], m[2]
				break
			}
		}
		go io.Copy(io.Discard, stdout)
		if addr == "" {
			t.Fatal("serve printed no demo URL")
		}

		body := []byte(`{"id":"evt_inflight","type":"checkout.completed","created_at":"2026-11-30T12:00:00Z","environment":"test","data":{}}`)
		h, _ := standard.Sign(secret, "evt_inflight", time.Now(), body)
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// Expect: 100-continue makes the server say when the handler starts
		// reading the body: from then on the delivery is in flight, on a
		// slow machine as on a fast one.
		fmt.Fprintf(conn, "POST /webhooks/demo HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n", addr, len(body))
		for k := range h {
			fmt.Fprintf(conn, "%s: %s\r\n", k, h.Get(k))
		}
		fmt.Fprint(conn, "\r\n")
		answers := bufio.NewReader(conn)
		conn.SetReadDeadline(time.Now().Add(stallLimit))
		if line, err := answers.ReadString('\n'); !strings.Contains(line, "100") {
			t.Fatalf("before the body: %q, %v; want 100 Continue", line, err)
		}
		for line := "x"; strings.TrimSpace(line) != ""; {
			if line, err = answers.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		conn.Write(body[:20])

		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		// The listener closes once the signal is handled.
		waitFor(t, func() bool {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
			}
			return err != nil
		})
		conn.Write(body[20:])
		status, _ := answers.ReadString('\n')
		if !strings.Contains(status, "200") {
			t.Fatalf("in-flight delivery answered %q, want 200", status)
		}
		// Shutdown is bounded by shutdownTimeout; past that, it is stuck.
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("payhook exited with %v after SIGTERM, want 0", err)
			}
		case <-time.After(shutdownTimeout + stallLimit):
			t.Fatalf("payhook did not exit within %v of SIGTERM", shutdownTimeout+stallLimit)
		}
		code, out, _ := run(t, map[string]string{"PAYHOOK_DB": dbURL}, "events", "show", "evt_inflight")
		if code != 0 || !strings.Contains(out, "evt_inflight") {
			t.Fatalf("the in-flight event was not stored: %d %s", code, out)
		}
	})
}
