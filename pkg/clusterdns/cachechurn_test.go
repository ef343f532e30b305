package clusterdns

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/nsmetrics"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// churn is a random record set kept beside a store, so a fresh store and
// handler can be built from the same records at any time.
type churn struct {
	r        *rand.Rand
	opts     store.Options
	services map[string]store.Service
	slices   map[string]store.EndpointSlice
	pods     map[string]store.Pod
	nss      map[string]bool
}

var (
	churnNS  = []string{"a", "b"}
	churnSvc = []string{"web", "db", "x"}
	churnIPs = []string{"10.0.0.1", "10.0.0.2", "10.0.1.1", "fd00::1", "fd00::2"}
)

func (c *churn) pick(s []string) string { return s[c.r.IntN(len(s))] }

func (c *churn) addrs(n int) []netip.Addr {
	var out []netip.Addr
	for range c.r.IntN(n + 1) {
		out = append(out, netip.MustParseAddr(c.pick(churnIPs)))
	}
	return out
}

func (c *churn) ports() []store.Port {
	var out []store.Port
	for _, p := range []store.Port{{Name: "http", Protocol: "tcp", Port: 80}, {Protocol: "tcp", Port: 81}, {Name: "dns", Protocol: "udp", Port: 53}} {
		if c.r.IntN(2) == 0 {
			out = append(out, p)
		}
	}
	return out
}

// change applies one random change to the records and to st.
func (c *churn) change(st *store.Store) {
	ns, name := c.pick(churnNS), c.pick(churnSvc)
	switch k := c.r.IntN(10); {
	case k < 3:
		v := store.Service{Namespace: ns, Name: name, Type: store.ServiceType(c.r.IntN(3)), Ports: c.ports()}
		switch v.Type {
		case store.ClusterIP:
			v.ClusterIPs = c.addrs(2)
		case store.ExternalName:
			v.ExternalName = c.pick([]string{"web.a.svc.cluster.local.", "db.b.svc.cluster.local.", "x.a.svc.cluster.local."})
		}
		c.services[ns+"/"+name] = v
		st.SetService(v)
	case k < 4:
		delete(c.services, ns+"/"+name)
		st.DeleteService(ns, name)
	case k < 7:
		v := store.EndpointSlice{Namespace: ns, Name: name + "-" + c.pick([]string{"1", "2"}), Service: name, Ports: c.ports()}
		for range c.r.IntN(3) {
			v.Endpoints = append(v.Endpoints, store.Endpoint{Addresses: c.addrs(1), Hostname: c.pick([]string{"", "h1"}), Ready: c.r.IntN(4) != 0})
		}
		c.slices[ns+"/"+v.Name] = v
		st.SetEndpointSlice(v)
	case k < 8:
		n := name + "-1"
		delete(c.slices, ns+"/"+n)
		st.DeleteEndpointSlice(ns, n)
	case k < 9:
		v := store.Pod{Namespace: ns, Name: "p" + name, IPs: c.addrs(1)}
		c.pods[ns+"/"+v.Name] = v
		st.SetPod(v)
	default:
		if c.nss[ns] {
			delete(c.nss, ns)
			st.DeleteNamespace(ns)
		} else {
			c.nss[ns] = true
			st.SetNamespace(store.Namespace{Name: ns})
		}
	}
}

func (c *churn) objects() store.Objects {
	var o store.Objects
	o.Services = slices.Collect(maps.Values(c.services))
	o.EndpointSlices = slices.Collect(maps.Values(c.slices))
	o.Pods = slices.Collect(maps.Values(c.pods))
	for ns := range c.nss {
		o.Namespaces = append(o.Namespaces, store.Namespace{Name: ns})
	}
	return o
}

// churnQuestions are the questions asked: every name the records can make
// (and some they cannot), in two cases, with the types the zone answers.
func churnQuestions() []dns.Question {
	var names []string
	for _, ns := range churnNS {
		for _, svc := range churnSvc {
			base := svc + "." + ns + ".svc.cluster.local."
			names = append(names, base, "_http._tcp."+base, "_tcp."+base, "h1."+base, "10-0-0-1."+base, "fd00--2."+base)
		}
		names = append(names, ns+".svc.cluster.local.", ns+".pod.cluster.local.", "10-0-0-2."+ns+".pod.cluster.local.",
			"web.svc.cluster.local.", "db."+ns+".svc.cluster.local.svc.cluster.local.")
	}
	for _, ip := range churnIPs {
		names = append(names, store.ReverseName(netip.MustParseAddr(ip)))
	}
	names = append(names, "cluster.local.", "svc.cluster.local.", "pod.cluster.local.", "dns-version.cluster.local.",
		"0.0.10.in-addr.arpa.", "1.0.10.in-addr.arpa.", "0.10.in-addr.arpa.", "10.in-addr.arpa.", "9.9.0.10.in-addr.arpa.")
	var qs []dns.Question
	for i, n := range names {
		types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeANY, dns.TypeSOA, dns.TypeCNAME, dns.TypeNS, dns.TypeTXT}
		for _, t := range types {
			qs = append(qs, dns.Question{Name: n, Qtype: t, Qclass: dns.ClassINET})
		}
		if i%3 == 0 {
			qs = append(qs, dns.Question{Name: strings.ToUpper(n), Qtype: dns.TypeA, Qclass: dns.ClassINET})
		}
	}
	return qs
}

// churnHandler is a handler as the server builds one, with the options that
// make answers depend on other names.
func churnHandler(t *testing.T, st *store.Store, amp bool) *Handler {
	rev, err := WithReverseZones([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("fd00::/120")})
	if err != nil {
		t.Fatal(err)
	}
	opts := []Option{rev}
	if amp {
		a, err := nsmetrics.New(10, "cluster.local", st)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, WithAmplification(a))
	}
	return NewHandler("cluster.local", st, opts...)
}

// ask returns the reply of h to q, normalised for comparison: id 0 and the
// SOA serials 0 (a fresh store has its own).
func ask(t *testing.T, h *Handler, q dns.Question, edns bool) string {
	t.Helper()
	req := new(dns.Msg)
	req.Question = []dns.Question{q}
	req.RecursionDesired = true
	if edns {
		req.SetEdns0(1232, false)
	}
	w := &fakeWriter{}
	h.ServeDNS(w, req)
	if w.err != nil || w.msg == nil {
		t.Fatalf("%s %s: no reply (%v)", q.Name, dns.TypeToString[q.Qtype], w.err)
	}
	m := w.msg
	m.Id = 0
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			if soa, ok := rr.(*dns.SOA); ok {
				soa.Serial = 0
			}
		}
	}
	return m.String()
}

// TestReplyCacheUnderChurn: a handler whose reply cache lives across
// snapshots answers every question, before and after each random change
// (asked twice, the second from the cache), as a fresh handler over a
// fresh store of the same records does, SOA serials aside.
func TestReplyCacheUnderChurn(t *testing.T) {
	qs := churnQuestions()
	seeds, steps := 12, 25
	if testing.Short() {
		seeds, steps = 3, 10
	}
	for seed := range uint64(seeds) {
		c := &churn{r: rand.New(rand.NewPCG(seed, 7)), services: map[string]store.Service{}, slices: map[string]store.EndpointSlice{},
			pods: map[string]store.Pod{}, nss: map[string]bool{}}
		c.opts = store.Options{Zone: "cluster.local", TTL: 5, Pods: []store.PodMode{store.PodsVerified, store.PodsInsecure}[seed%2],
			IgnoreEmptyService: seed%3 == 1}
		st, err := store.New(c.opts)
		if err != nil {
			t.Fatal(err)
		}
		st.Publish()
		h := churnHandler(t, st, seed%2 == 0)
		for step := range steps {
			for range 1 + c.r.IntN(3) {
				c.change(st)
			}
			st.Publish()
			fresh, err := store.New(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			fresh.Replace(c.objects())
			fresh.Publish()
			fh := churnHandler(t, fresh, false)
			for i, q := range qs {
				edns := i%2 == 0
				want := ask(t, fh, q, edns)
				for try := range 2 {
					if got := ask(t, h, q, edns); got != want {
						t.Fatalf("seed %d step %d try %d: %s %s:\ngot  %s\nwant %s", seed, step, try, q.Name, dns.TypeToString[q.Qtype], got, want)
					}
				}
			}
		}
	}
}

// TestReplyCacheKeepsUnchanged: a change to one Service leaves the cached
// replies of the others in the cache, and retires its own.
func TestReplyCacheKeepsUnchanged(t *testing.T) {
	st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		st.SetService(store.Service{Namespace: "ns", Name: fmt.Sprintf("s%d", i), Type: store.ClusterIP,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, 0, byte(i + 1)})}})
	}
	st.Publish()
	h := NewHandler("cluster.local", st)
	query := func(name string) []byte {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		b, _ := m.Pack()
		return b
	}
	for i := range 10 {
		ask(t, h, dns.Question{Name: fmt.Sprintf("s%d.ns.svc.cluster.local.", i), Qtype: dns.TypeA, Qclass: dns.ClassINET}, false)
	}
	st.SetService(store.Service{Namespace: "ns", Name: "s0", Type: store.ClusterIP, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.1.1")}})
	st.Publish()
	if _, ok := h.AnswerWire(nil, query("s0.ns.svc.cluster.local.")); ok {
		t.Error("the changed Service's reply is still cached")
	}
	for i := 1; i < 10; i++ {
		if _, ok := h.AnswerWire(nil, query(fmt.Sprintf("s%d.ns.svc.cluster.local.", i))); !ok {
			t.Errorf("s%d: an unchanged Service's reply left the cache", i)
		}
	}
}

// TestReplyCacheRetiresDependents: replies made from other names than the
// question's are retired when those change: the additional addresses of
// SRV targets, the target of an ExternalName inside the zone, and an
// authoritative reverse name whose addresses below went away.
func TestReplyCacheRetiresDependents(t *testing.T) {
	st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	slice := func(ip string) store.EndpointSlice {
		return store.EndpointSlice{Namespace: "ns", Name: "hl-1", Service: "hl", Ports: []store.Port{{Name: "http", Protocol: "tcp", Port: 80}},
			Endpoints: []store.Endpoint{{Addresses: []netip.Addr{netip.MustParseAddr(ip)}, Hostname: "h1", Ready: true}}}
	}
	st.SetService(store.Service{Namespace: "ns", Name: "hl", Type: store.Headless})
	st.SetEndpointSlice(slice("10.0.0.1"))
	st.SetService(store.Service{Namespace: "ns", Name: "web", Type: store.ClusterIP, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.0.0.9")}})
	st.SetService(store.Service{Namespace: "ns", Name: "alias", Type: store.ExternalName, ExternalName: "web.ns.svc.cluster.local."})
	st.Publish()
	h := churnHandler(t, st, false)
	cases := []struct {
		q           dns.Question
		before, now string
	}{
		{dns.Question{Name: "_http._tcp.hl.ns.svc.cluster.local.", Qtype: dns.TypeSRV, Qclass: dns.ClassINET}, "A\t10.0.0.1", "A\t10.1.0.1"},
		{dns.Question{Name: "alias.ns.svc.cluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET}, "A\t10.0.0.9", "A\t10.1.0.9"},
		{dns.Question{Name: "0.0.10.in-addr.arpa.", Qtype: dns.TypeA, Qclass: dns.ClassINET}, "status: NOERROR", "status: NXDOMAIN"},
	}
	for _, tc := range cases {
		if got := ask(t, h, tc.q, false); !strings.Contains(got, tc.before) {
			t.Fatalf("%s before the change: want %q in\n%s", tc.q.Name, tc.before, got)
		}
	}
	st.SetEndpointSlice(slice("10.1.0.1"))
	st.SetService(store.Service{Namespace: "ns", Name: "web", Type: store.ClusterIP, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.1.0.9")}})
	st.Publish()
	for _, tc := range cases {
		if got := ask(t, h, tc.q, false); !strings.Contains(got, tc.now) {
			t.Errorf("%s after the change: want %q in\n%s", tc.q.Name, tc.now, got)
		}
	}
}
