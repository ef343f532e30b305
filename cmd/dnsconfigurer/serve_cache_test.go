package main

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/miekg/dns"
)

// stubUpstream is a UDP upstream on 127.0.0.1 answering every question
// with an A record of ip at ttl.
func stubUpstream(t *testing.T, ttl uint32, ip string) *testkit.Upstream {
	t.Helper()
	return testkit.NewUpstream(t, testkit.Reply(func(q dns.Question, r *dns.Msg) {
		r.Answer = []dns.RR{testkit.A(q.Name, ttl, ip)}
	}), testkit.UDPOnly())
}

// TestServeCachesForwarded: the cluster DNS caches forwarded answers (the
// upstream is asked once for repeated questions, the TTL ages), and with
// --serve-stale answers an expired name with TTL 30 once the upstream is
// gone.
func TestServeCachesForwarded(t *testing.T) {
	up := stubUpstream(t, 1, "192.0.2.7")
	addr := startServe(t, "--listen", "127.0.0.1:0", "--objects", "../../examples/objects", "--upstream", up.Addr,
		"--serve-stale", "1h", "--cache-size", "4Mi")
	ask := func() *dns.Msg {
		t.Helper()
		r, err := testkit.Exchange("udp", addr, "www.example.org.", dns.TypeA)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for range 5 {
		if r := ask(); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("forwarded answer: %v", r)
		}
	}
	if n := up.ClientQueries(); n != 1 {
		t.Fatalf("upstream asked %d times for 5 identical questions, want 1 (cached)", n)
	}
	up.Stop()
	// Every 100 ms while the 1 s TTL runs out.
	testkit.WaitEvery(t, 10*time.Second, 100*time.Millisecond, func() error {
		r := ask()
		if r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 && r.Answer[0].Header().Ttl == 30 {
			return nil // stale, served with RFC 8767's TTL
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].Header().Ttl > 1 {
			t.Fatalf("while the entry expires: %v", r)
		}
		return fmt.Errorf("no stale answer after the upstream died: %v", r)
	})
}

func TestServeCacheFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cache-size", "10000"}, "at least 1048576 bytes"},
		{[]string{"--cache-size", "lots"}, "want bytes"},
		{[]string{"--serve-stale", "-1s"}, `--serve-stale (cache.serveStale): "-1s": must be between 0s and`},
		{[]string{"--prefetch", "-1"}, "--prefetch (cache.prefetch.amount): -1: must be >= 0"},
		{[]string{"--zone-cache-size", "512Ki"}, `--zone-cache-size (cache.zoneBytes): "512Ki": must be at least 1Mi`},
		{[]string{"--zone-cache-size", "big"}, "want bytes"},
	} {
		// The flag's own errors, then the configuration's (Validate).
		f, err := parseServeFlags(append([]string{"--listen", "127.0.0.1:0", "--objects", "x"}, tc.args...), io.Discard)
		if err == nil {
			_, err = f.serverConfig()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestServeZoneCacheFlag: --zone-cache-size sets cache.zoneBytes, which
// otherwise keeps the configuration's default.
func TestServeZoneCacheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{nil, 16 << 20},
		{[]string{"--zone-cache-size", "32Mi"}, 32 << 20},
		{[]string{"--zone-cache-size", "2000000"}, 2000000},
	} {
		f, err := parseServeFlags(append([]string{"--listen", "127.0.0.1:0", "--objects", "../../examples/objects"}, tc.args...), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		cfg, err := f.serverConfig()
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := cfg.Cache.ZoneBytes.Bytes(); got != tc.want {
			t.Errorf("%v: cache.zoneBytes %d, want %d", tc.args, got, tc.want)
		}
	}
}
