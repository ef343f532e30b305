package dnsserver_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver/store"
)

func TestResolvConfUpstreamsFollowsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("nameserver 192.0.2.1\nsearch example.org\n")
	src, err := dnsserver.NewResolvConfUpstreams(path)
	if err != nil {
		t.Fatal(err)
	}
	src.Interval = 0
	if got := src.Upstreams(); !slices.Equal(got, []string{"192.0.2.1"}) {
		t.Fatalf("Upstreams = %v", got)
	}
	write("nameserver 192.0.2.2\nnameserver 192.0.2.3\n# longer file\n")
	if got := src.Upstreams(); !slices.Equal(got, []string{"192.0.2.2", "192.0.2.3"}) {
		t.Fatalf("after change Upstreams = %v", got)
	}
	// A broken file keeps the previous list and reports the error.
	write("nameserver\n")
	if got := src.Upstreams(); !slices.Equal(got, []string{"192.0.2.2", "192.0.2.3"}) {
		t.Fatalf("after a bad file Upstreams = %v", got)
	}
	if src.Err() == nil {
		t.Errorf("Err() = nil after a bad file")
	}
	if _, err := dnsserver.NewResolvConfUpstreams(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Errorf("missing file accepted")
	}
}

// TestListenSeveralAddresses serves 127.0.0.1 and ::1 at once (the second
// is skipped where the host has no IPv6 loopback).
func TestListenSeveralAddresses(t *testing.T) {
	listen := []string{"127.0.0.1:0", "127.0.0.2:0"}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		ln.Close()
		listen = append(listen, "[::1]:0")
	}
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		listen = slices.DeleteFunc(listen, func(s string) bool { return s == "127.0.0.2:0" })
	} else {
		ln.Close()
	}
	st, _ := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	st.SetService(store.Service{Namespace: "a", Name: "b", ClusterIPs: []netipAddr{mustAddr("10.0.0.1")}})
	st.Publish()
	srv := &dnsserver.Server{Listen: listen, Handler: dnsserver.NewHandler("cluster.local", st)}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	addrs := srv.Addrs()
	if len(addrs) != len(listen) {
		t.Fatalf("Addrs = %v for %v", addrs, listen)
	}
	for _, a := range addrs {
		for _, network := range []string{"udp", "tcp"} {
			m := new(dns.Msg)
			m.SetQuestion("b.a.svc.cluster.local.", dns.TypeA)
			r, _, err := (&dns.Client{Net: network, Timeout: 2 * time.Second}).Exchange(m, a)
			if err != nil || len(r.Answer) != 1 {
				t.Errorf("%s %s: %v %v", network, a, r, err)
			}
		}
	}
	// A busy address fails Start and releases what it bound.
	busy := &dnsserver.Server{Listen: []string{"127.0.0.1:0", addrs[0]}, Handler: dnsserver.NewHandler("cluster.local", st)}
	if err := busy.Start(context.Background()); err == nil {
		busy.Shutdown(context.Background())
		t.Fatalf("Start on a busy address succeeded")
	}
}
