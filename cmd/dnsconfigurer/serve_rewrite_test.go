package main

import (
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// TestServeRewritesReload: the config file's rewrites answer an outside
// name with a Service's address (TTLs zeroed in the comparison), and a
// reload that drops them sends the name upstream again.
func TestServeRewritesReload(t *testing.T) {
	up := stubUpstream(t, 300, "192.0.2.1").Addr
	path := filepath.Join(t.TempDir(), "server.yaml")
	write := func(rewrites string) {
		t.Helper()
		testkit.WriteAtomic(t, path, exampleConfig(fmt.Sprintf("forward:\n- zone: .\n  upstreams: [%q]\n%s", up, rewrites)))
	}
	var addr string
	answer := func() string {
		t.Helper()
		r, err := testkit.Exchange("udp", addr, "db.example.com.", dns.TypeA)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("db.example.com: %v %v", r, err)
		}
		r.Answer[0].Header().Ttl = 0
		return r.Answer[0].String()
	}
	want := func(ip string) string {
		return (&dns.A{Hdr: dns.RR_Header{Name: "db.example.com.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0}, A: net.ParseIP(ip)}).String()
	}
	write("rewrites:\n- {from: db.example.com, to: web.prod.svc.cluster.local}\n")
	addr = startServe(t, "--listen", "127.0.0.1:0", "--config", path)
	r, err := testkit.Exchange("udp", addr, "web.prod.svc.cluster.local.", dns.TypeA)
	if err != nil || len(r.Answer) != 1 {
		t.Fatalf("web: %v %v", r, err)
	}
	webIP := r.Answer[0].(*dns.A).A.String()
	if got := answer(); got != want(webIP) {
		t.Fatalf("rewritten: %s, want %s", got, want(webIP))
	}
	write("")
	testkit.WaitEqual(t, 15*time.Second, "db.example.com after the rewrites were removed", answer, want("192.0.2.1"))
}
