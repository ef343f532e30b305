package clusterdns

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// TestReplyCacheRemadeReplyKeepsItsNames: a cached reply made again after
// one of its names changed (the same question, put over the stale entry)
// is still retired when another of its names changes later. The reply
// cache used to release the stale entry's names before counting the new
// one's, forgetting a name both held: the new reply was then served after
// that name changed. Found by TestReplyCacheProperty (seed 0).
func TestReplyCacheRemadeReplyKeepsItsNames(t *testing.T) {
	ip := func(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }
	slice := func(addr string, port uint16) store.EndpointSlice {
		return store.EndpointSlice{Namespace: "a", Name: "hl-1", Service: "hl", Ports: []store.Port{{Name: "http", Protocol: "tcp", Port: port}},
			Endpoints: []store.Endpoint{{Addresses: ip(addr), Hostname: "h1", Ready: true}}}
	}
	cases := []struct {
		name string
		amp  bool
		q    dns.Question
		// first makes the question's reply; remake changes another name
		// it was made from; last changes the question's own name.
		first, remake, last func(st *store.Store)
		want                string
	}{
		{
			// The namespace metrics make a reply depend on whether its
			// namespace is known: the first Service of a makes the NXDOMAIN
			// of db.a again, and db.a itself comes next.
			name: "NXDOMAIN, then the namespace, then the name", amp: true,
			q:     dns.Question{Name: "db.a.svc.cluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET},
			first: func(*store.Store) {},
			remake: func(st *store.Store) {
				st.SetService(store.Service{Namespace: "a", Name: "web", Type: store.ClusterIP, ClusterIPs: ip("10.0.0.1")})
			},
			last: func(st *store.Store) {
				st.SetService(store.Service{Namespace: "a", Name: "db", Type: store.ClusterIP, ClusterIPs: ip("10.0.0.2")})
			},
			want: "A\t10.0.0.2",
		},
		{
			// An SRV reply depends on its targets' addresses: an endpoint
			// moving makes it again, and its port changes next.
			name: "SRV, then a target's address, then the port",
			q:    dns.Question{Name: "_http._tcp.hl.a.svc.cluster.local.", Qtype: dns.TypeSRV, Qclass: dns.ClassINET},
			first: func(st *store.Store) {
				st.SetService(store.Service{Namespace: "a", Name: "hl", Type: store.Headless})
				st.SetEndpointSlice(slice("10.0.0.1", 80))
			},
			remake: func(st *store.Store) { st.SetEndpointSlice(slice("10.0.0.2", 80)) },
			last:   func(st *store.Store) { st.SetEndpointSlice(slice("10.0.0.2", 8080)) },
			want:   "SRV\t0 100 8080 h1.hl.a.svc.cluster.local.",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5})
			if err != nil {
				t.Fatal(err)
			}
			tc.first(st)
			st.Publish()
			h := churnHandler(t, st, tc.amp)
			for _, change := range []func(*store.Store){nil, tc.remake, tc.last} {
				if change != nil {
					change(st)
					st.Publish()
				}
				ask(t, h, tc.q, false)
				ask(t, h, tc.q, false) // from the cache
			}
			if got := ask(t, h, tc.q, false); !strings.Contains(got, tc.want) {
				t.Errorf("want %q in\n%s", tc.want, got)
			}
		})
	}
}
