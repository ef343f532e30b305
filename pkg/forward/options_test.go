package forward_test

import (
	"context"
	"net"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// TestForwardRelaysOnlyItsOptions (issue 27 item 5): of a client's EDNS0
// options only loop markers and Config.RelayOptions reach the upstream;
// Client Subnet, cookies, NSID, padding, keepalive and unknown codes do
// not. The DO bit does.
func TestForwardRelaysOnlyItsOptions(t *testing.T) {
	const autopathCode = 65001
	client := []dns.EDNS0{
		&dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(198, 51, 100, 0).To4()},
		&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"},
		&dns.EDNS0_NSID{Code: dns.EDNS0NSID},
		&dns.EDNS0_PADDING{Padding: make([]byte, 16)},
		&dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE},
		&dns.EDNS0_LOCAL{Code: 65010, Data: []byte("unknown")},
		&dns.EDNS0_LOCAL{Code: autopathCode, Data: []byte("default.svc.cluster.local")},
		// Another forwarder's loop marker, passed on for hop counting.
		&dns.EDNS0_LOCAL{Code: forward.DefaultLoopOptionCode, Data: make([]byte, 12)},
	}
	for _, tc := range []struct {
		name  string
		relay []uint16
		want  []uint16 // the options the upstream sees, ours last
	}{
		{"cluster DNS (relays none)", nil, []uint16{forward.DefaultLoopOptionCode, forward.DefaultLoopOptionCode}},
		{"node-local (relays autopath)", []uint16{autopathCode}, []uint16{autopathCode, forward.DefaultLoopOptionCode, forward.DefaultLoopOptionCode}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := testkit.NewUpstream(t, answering)
			fwd := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, RelayOptions: tc.relay})
			m := new(dns.Msg)
			m.SetQuestion("ecs.example.org.", dns.TypeA)
			m.SetEdns0(1232, true)
			m.IsEdns0().Option = slices.Clone(client)
			if _, err := fwd.Exchange(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			qs := up.Queries()
			if len(qs) != 1 {
				t.Fatalf("upstream got %d queries, want 1", len(qs))
			}
			var codes []uint16
			var do bool
			if o := qs[0].Msg.IsEdns0(); o != nil {
				do = o.Do()
				for _, e := range o.Option {
					codes = append(codes, e.Option())
				}
			}
			if !slices.Equal(codes, tc.want) || !do {
				t.Fatalf("upstream saw options %v (DO %v), want %v and DO", codes, do, tc.want)
			}
			if len(m.IsEdns0().Option) != len(client) {
				t.Fatalf("Exchange modified the client's query: %v", m.IsEdns0().Option)
			}
		})
	}
}
