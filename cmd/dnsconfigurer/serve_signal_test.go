package main

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/miekg/dns"
)

// TestServeSIGTERM runs `dnsconfigurer serve` (this test binary re-executed
// into main, as TestShimSIGTERMStalledRuntime does) and sends it a real
// SIGTERM: /readyz fails at once while names are still answered over UDP
// and TCP for the lameduck, then the process exits 0 within the lameduck
// and a bound.
func TestServeSIGTERM(t *testing.T) {
	runChild()
	const (
		lameduck = 2 * time.Second
		bound    = 3 * time.Second // after the lameduck: the listeners' shutdown and the exit
	)
	c := startChild(t, "TestServeSIGTERM", "serve", "--listen", "127.0.0.1:0", "--objects", "../../examples/objects", "--metrics-listen", "127.0.0.1:0",
		"--upstream", "127.0.0.1:1", "--lameduck", lameduck.String())
	stderr, exited := c.stderr, c.exited
	addr := stderr.WaitMatch(t, 30*time.Second, addrRe, exited)[1]
	metrics := stderr.WaitMatch(t, 30*time.Second, metricsRe, exited)[1]
	readyz := func() int {
		resp, err := http.Get("http://" + metrics + "/readyz")
		if err != nil {
			return 0 // the listener has closed
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	query := func(network string) error {
		r, _, err := (&dns.Client{Net: network, Timeout: time.Second}).Exchange(new(dns.Msg).SetQuestion("web.prod.svc.cluster.local.", dns.TypeA), addr)
		if err == nil && len(r.Answer) != 1 {
			t.Errorf("%s: %v, want the Service's address", network, r)
		}
		return err
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		if code := readyz(); code != http.StatusOK {
			return fmt.Errorf("/readyz %d, want 200:\n%s", code, stderr.String())
		}
		return nil
	})

	sent := time.Now()
	if err := syscall.Kill(c.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEvery(t, time.Second, 20*time.Millisecond, func() error {
		if code := readyz(); code != http.StatusServiceUnavailable {
			return fmt.Errorf("/readyz %d after SIGTERM, want 503", code)
		}
		return nil
	})
	failing := time.Since(sent)
	// Names answer through the lameduck: ask until the first half of it is
	// over (each query is answered in well under a millisecond).
	answered := 0
	for time.Since(sent) < lameduck/2 {
		for _, network := range []string{"udp", "tcp"} {
			if err := query(network); err != nil {
				t.Fatalf("%s query %v after SIGTERM, in the lameduck: %v", network, time.Since(sent).Round(time.Millisecond), err)
			}
			answered++
		}
		if code := readyz(); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz %d %v after SIGTERM, want 503 through the lameduck", code, time.Since(sent))
		}
	}
	select {
	case <-exited:
		took := time.Since(sent)
		t.Logf("/readyz 503 %v after SIGTERM; %d queries answered in the lameduck; exited %v after SIGTERM (lameduck %v): %v",
			failing.Round(time.Millisecond), answered, took.Round(time.Millisecond), lameduck, c.waitErr)
		if c.waitErr != nil {
			t.Errorf("serve exit: %v\n%s", c.waitErr, stderr.String())
		}
		if took < lameduck {
			t.Errorf("exited %v after SIGTERM, before the %v lameduck ended", took, lameduck)
		}
	case <-time.After(lameduck + bound - time.Since(sent)):
		t.Fatalf("serve still running %v after SIGTERM, want an exit within the %v lameduck + %v\n%s", time.Since(sent), lameduck, bound, stderr.String())
	}
	if err := query("udp"); err == nil {
		t.Error("answered after the process exited")
	}
}
