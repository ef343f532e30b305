package dnsserver_test

import (
	"context"
	"net"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
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
	srv := &dnsserver.Server{Listen: listen, Handler: answerA}
	testkit.StartServer(t, srv)
	addrs := srv.Addrs()
	if len(addrs) != len(listen) {
		t.Fatalf("Addrs = %v for %v", addrs, listen)
	}
	for _, a := range addrs {
		for _, network := range []string{"udp", "tcp"} {
			m := new(dns.Msg)
			m.SetQuestion("b.a.svc.cluster.local.", dns.TypeA)
			if r := testkit.Ask(t, network, a, m); len(r.Answer) != 1 {
				t.Errorf("%s %s: %v", network, a, r)
			}
		}
	}
	// A busy address fails Start and releases what it bound.
	busy := &dnsserver.Server{Listen: []string{"127.0.0.1:0", addrs[0]}, Handler: answerA}
	if err := busy.Start(context.Background()); err == nil {
		busy.Shutdown(context.Background())
		t.Fatalf("Start on a busy address succeeded")
	}
}
