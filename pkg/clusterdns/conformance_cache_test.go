package clusterdns_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// TestWireCacheFollowsRequestsAndSnapshots checks the packed-reply cache:
// per-request ID, RD and CD bits, question case and EDNS0 are honoured, and a
// new snapshot is served at once.
func TestWireCacheFollowsRequestsAndSnapshots(t *testing.T) {
	e := start(t, store.Options{TTL: 5}, fixture)
	cases := []struct {
		name   string
		qname  string
		rd, cd bool
		edns   bool
	}{
		{"plain", "web.prod.svc.cluster.local.", true, false, false},
		{"rd off", "web.prod.svc.cluster.local.", false, false, false},
		{"cd on", "web.prod.svc.cluster.local.", true, true, false},
		{"edns", "web.prod.svc.cluster.local.", true, false, true},
		{"other case", "WEB.prod.svc.cluster.local.", true, false, false},
	}
	for round := range 2 { // the second round is served from the cache
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%d", tc.name, round), func(t *testing.T) {
				m := new(dns.Msg)
				m.SetQuestion(tc.qname, dns.TypeA)
				m.RecursionDesired, m.CheckingDisabled = tc.rd, tc.cd
				if tc.edns {
					m.SetEdns0(1232, true)
				}
				r := testkit.Ask(t, "udp", e.addr, m)
				if r.Id != m.Id || r.RecursionDesired != tc.rd || r.CheckingDisabled != tc.cd || (r.IsEdns0() != nil) != tc.edns {
					t.Fatalf("reply flags: id %d/%d rd %v cd %v opt %v", r.Id, m.Id, r.RecursionDesired, r.CheckingDisabled, r.IsEdns0())
				}
				if tc.edns && !r.IsEdns0().Do() {
					t.Errorf("DO bit not echoed")
				}
				if len(r.Answer) != 1 || r.Answer[0].Header().Name != tc.qname || r.Question[0].Name != tc.qname {
					t.Fatalf("answer %v", r.Answer)
				}
			})
		}
	}
	// A new snapshot replaces the cached answer.
	objs, err := kubefeed.LoadManifests(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for i := range objs.Services {
		if objs.Services[i].Name == "web" {
			objs.Services[i].ClusterIPs = objs.Services[i].ClusterIPs[:0]
			objs.Services[i].ClusterIPs = append(objs.Services[i].ClusterIPs, netip.MustParseAddr("10.96.7.7"))
		}
	}
	e.st.Replace(objs)
	e.st.Publish()
	r := ask(t, "udp", e.addr, "web.prod.svc.cluster.local.", dns.TypeA, 0)
	if got := rrStrings(r.Answer); !slices.Equal(got, []string{"web.prod.svc.cluster.local. 5 IN A 10.96.7.7"}) {
		t.Fatalf("after publish: %v", got)
	}
}
