package dnsserver_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
)

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
	srv := &dnsserver.Server{Listen: listen, Handler: dns.HandlerFunc(answerA)}
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
	busy := &dnsserver.Server{Listen: []string{"127.0.0.1:0", addrs[0]}, Handler: dns.HandlerFunc(answerA)}
	if err := busy.Start(context.Background()); err == nil {
		busy.Shutdown(context.Background())
		t.Fatalf("Start on a busy address succeeded")
	}
}
