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
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "PAYHOOK_TEST_AS_MAIN=1", "PAYHOOK_TEST_ARGS=serve --addr 127.0.0.1:0", "PAYHOOK_DB="+dbURL)
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
		fmt.Fprintf(conn, "POST /webhooks/demo HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", addr, len(body))
		for k := range h {
			fmt.Fprintf(conn, "%s: %s\r\n", k, h.Get(k))
		}
		fmt.Fprint(conn, "\r\n")
		conn.Write(body[:20])
		time.Sleep(300 * time.Millisecond)

		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		// The listener closes once the signal is handled; under load that
		// can take a moment.
		refused := false
		for deadline := time.Now().Add(10 * time.Second); !refused && time.Now().Before(deadline); {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if refused = err != nil; !refused {
				c.Close()
				time.Sleep(20 * time.Millisecond)
			}
		}
		if !refused {
			t.Error("payhook still accepts connections 10s after SIGTERM")
		}
		conn.Write(body[20:])
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		status, _ := bufio.NewReader(conn).ReadString('\n')
		if !strings.Contains(status, "200") {
			t.Fatalf("in-flight delivery answered %q, want 200", status)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("payhook exited with %v after SIGTERM, want 0", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("payhook did not exit within 30s of SIGTERM")
		}
		code, out, _ := run(t, map[string]string{"PAYHOOK_DB": dbURL}, "events", "show", "evt_inflight")
		if code != 0 || !strings.Contains(out, "evt_inflight") {
			t.Fatalf("the in-flight event was not stored: %d %s", code, out)
		}
	})
}
