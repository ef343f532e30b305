package clusterdns

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/replycache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// topoSnapshot is a headless Service web.ns (PreferSameZone) with two
// ready endpoints in za, one in zb and a not-ready one in zc; db.ns is
// headless without a traffic distribution. Pod 10.0.0.1 runs on n1 (za).
func topoSnapshot(t *testing.T) *store.Snapshot {
	t.Helper()
	return topoStore(t).Snapshot()
}

// topoStore is topoSnapshot's Store, published, with pods verified (as
// autopath by source needs).
func topoStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5, Pods: store.PodsVerified})
	if err != nil {
		t.Fatal(err)
	}
	ports := []store.Port{{Name: "http", Protocol: "tcp", Port: 80}}
	st.SetService(store.Service{Namespace: "ns", Name: "web", Type: store.Headless, Ports: ports, TrafficDistribution: topology.PreferSameZone})
	st.SetService(store.Service{Namespace: "ns", Name: "db", Type: store.Headless, Ports: ports})
	for _, svc := range []string{"web", "db"} {
		st.SetEndpointSlice(store.EndpointSlice{Namespace: "ns", Name: svc + "-1", Service: svc, Ports: ports, Endpoints: []store.Endpoint{
			{Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Hostname: svc + "-0", Ready: true, TopologyZone: "za", NodeName: "n1"},
			{Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.2")}, Hostname: svc + "-1", Ready: true, TopologyZone: "za", NodeName: "n2"},
			{Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.3")}, Hostname: svc + "-2", Ready: true, TopologyZone: "zb", NodeName: "n3"},
			{Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.4")}, Hostname: svc + "-3", Ready: false, TopologyZone: "zc", NodeName: "n4"},
		}})
	}
	st.SetNodeTopology(store.NodeTopology{Name: "n1", TopologyZone: "za"})
	st.SetPod(store.Pod{Namespace: "ns", Name: "client", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.9")}, NodeName: "n1"})
	st.Publish()
	return st
}

// TestZoneScopedAnswer answers CoreDNS's zone-scoped names: pin answers
// the topology zone's ready endpoints or NODATA, prefer falls back to
// every endpoint; a Service without variants is not answered (NXDOMAIN).
func TestZoneScopedAnswer(t *testing.T) {
	z := newZone(topoSnapshot(t))
	tests := []struct {
		name  string
		qtype uint16
		ok    bool
		rcode int
		want  []string // answer data, sorted
	}{
		{"za.pin._zone.web.ns.svc.cluster.local.", dns.TypeA, true, dns.RcodeSuccess, []string{"10.0.0.1", "10.0.0.2"}},
		{"ZB.pin._zone.web.ns.svc.cluster.local.", dns.TypeA, true, dns.RcodeSuccess, []string{"10.0.0.3"}},
		{"zc.pin._zone.web.ns.svc.cluster.local.", dns.TypeA, true, dns.RcodeSuccess, nil}, // not ready: NODATA
		{"zz.pin._zone.web.ns.svc.cluster.local.", dns.TypeA, true, dns.RcodeSuccess, nil},
		{"zz.prefer._zone.web.ns.svc.cluster.local.", dns.TypeA, true, dns.RcodeSuccess, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}},
		{"zb.prefer._zone.web.ns.svc.cluster.local.", dns.TypeA, true, dns.RcodeSuccess, []string{"10.0.0.3"}},
		{"za.pin._zone.web.ns.svc.cluster.local.", dns.TypeAAAA, true, dns.RcodeSuccess, nil},
		{"za.pin._zone.web.ns.svc.cluster.local.", dns.TypeTXT, true, dns.RcodeSuccess, nil},
		{"zb.pin._zone.web.ns.svc.cluster.local.", dns.TypeSRV, true, dns.RcodeSuccess, []string{"web-2.web.ns.svc.cluster.local."}},
		{"za.pin._zone.db.ns.svc.cluster.local.", dns.TypeA, false, 0, nil},
		{"za.pin._zone.none.ns.svc.cluster.local.", dns.TypeA, false, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+dns.TypeToString[tt.qtype], func(t *testing.T) {
			r, ok := z.zoneScopedAnswer(tt.qtype, tt.name, strings.ToLower(tt.name))
			if ok != tt.ok {
				t.Fatalf("answered %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			var got []string
			for _, rr := range r.Answer {
				if rr.Header().Name != tt.name {
					t.Errorf("owner %s, want %s", rr.Header().Name, tt.name)
				}
				switch v := rr.(type) {
				case *dns.A:
					got = append(got, v.A.String())
				case *dns.SRV:
					got = append(got, v.Target)
				}
			}
			slices.Sort(got)
			if r.Rcode != tt.rcode || !slices.Equal(got, tt.want) {
				t.Errorf("rcode %d answer %v, want %d %v", r.Rcode, got, tt.rcode, tt.want)
			}
			if len(r.Answer) == 0 && len(r.Ns) == 0 {
				t.Error("NODATA without the SOA")
			}
			if tt.qtype == dns.TypeSRV && len(r.Extra) != len(r.Answer) {
				t.Errorf("SRV extra %v, want the targets' addresses", r.Extra)
			}
			if !slices.Contains(r.deps, "web.ns.svc.cluster.local.") {
				t.Errorf("deps %v lack the Service name", r.deps)
			}
		})
	}
}

// TestClientTopology places a client by the topology option (taken off
// the query), else by its source address.
func TestClientTopology(t *testing.T) {
	snap := topoSnapshot(t)
	const code = topology.DefaultOptionCode
	withOption := func(c topology.Client) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
		topology.Add(m, code, c)
		return m
	}
	plain := func() *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
		return m
	}
	pod := &net.UDPAddr{IP: net.ParseIP("10.0.0.9"), Port: 5353}
	stranger := &net.TCPAddr{IP: net.ParseIP("10.9.9.9"), Port: 5353}
	tests := []struct {
		desc string
		req  *dns.Msg
		code uint16
		src  net.Addr
		want topology.Client
	}{
		{"option wins over the source", withOption(topology.Client{Zone: "zb", Node: "n3"}), code, pod, topology.Client{Zone: "zb", Node: "n3"}},
		{"an empty option falls to the source", withOption(topology.Client{}), code, pod, topology.Client{Zone: "za", Node: "n1"}},
		{"no option: the source pod's", plain(), code, pod, topology.Client{Zone: "za", Node: "n1"}},
		{"unknown source", plain(), code, stranger, topology.Client{}},
		{"option of another code is not read", withOption(topology.Client{Zone: "zb"}), code + 1, stranger, topology.Client{}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			ip := dnsmsg.ClientAddr(tt.src)
			got := clientTopology(tt.req, tt.code, ip, snap)
			if got != tt.want {
				t.Errorf("clientTopology = %+v, want %+v", got, tt.want)
			}
			if opt := tt.req.IsEdns0(); tt.code == code && opt != nil {
				for _, o := range opt.Option {
					if o.Option() == code {
						t.Error("the topology option is still in the query")
					}
				}
			}
		})
	}
}

// TestVariantKey keys a variant's reply apart from the name's, and a
// name without variants once.
func TestVariantKey(t *testing.T) {
	snap := topoSnapshot(t)
	k := replycache.Key{Name: "web.ns.svc.cluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET}
	za := variantKey(k, snap.VariantFor("web.ns.svc.cluster.local.", "za", "n1"))
	zb := variantKey(k, snap.VariantFor("web.ns.svc.cluster.local.", "zb", ""))
	other := variantKey(k, snap.VariantFor("web.ns.svc.cluster.local.", "zz", ""))
	if za == zb || za == k || zb == k {
		t.Errorf("keys not apart: %q %q %q", za.Name, zb.Name, k.Name)
	}
	if other != k {
		t.Errorf("a topology zone without endpoints keys %q, want the name's %q", other.Name, k.Name)
	}
	db := replycache.Key{Name: "db.ns.svc.cluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET}
	if got := variantKey(db, snap.VariantFor(db.Name, "za", "n1")); got != db {
		t.Errorf("a name without variants keys %q, want %q", got.Name, db.Name)
	}
}

// snapRecords serves one Snapshot.
type snapRecords struct{ snap *store.Snapshot }

func (r snapRecords) Snapshot() *store.Snapshot { return r.snap }

// TestServeDNSTopology asks through ServeDNS with the reply cache on, in
// an order where a cached reply made for one client would reach another:
// each gets its own, and AnswerWire leaves the per-client name to
// ServeDNS.
func TestServeDNSTopology(t *testing.T) {
	h := NewHandler("cluster.local", snapRecords{topoSnapshot(t)}, WithReplyCache(1<<20), WithTopology(topology.DefaultOptionCode))
	pod := &net.UDPAddr{IP: net.ParseIP("10.0.0.9"), Port: 4000}      // on n1, za
	stranger := &net.UDPAddr{IP: net.ParseIP("10.9.9.9"), Port: 4000} // no pod
	const web, db = "web.ns.svc.cluster.local.", "db.ns.svc.cluster.local."
	all := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}
	tests := []struct {
		desc   string
		src    net.Addr
		name   string
		option topology.Client
		want   []string
	}{
		{"pod in za", pod, web, topology.Client{}, []string{"10.0.0.1", "10.0.0.2"}},
		{"stranger", stranger, web, topology.Client{}, all},
		{"option zb", stranger, web, topology.Client{Zone: "zb"}, []string{"10.0.0.3"}},
		{"pod in za again", pod, web, topology.Client{}, []string{"10.0.0.1", "10.0.0.2"}},
		{"option over the pod", pod, web, topology.Client{Zone: "zb", Node: "n3"}, []string{"10.0.0.3"}},
		{"stranger again", stranger, web, topology.Client{}, all},
		{"no traffic distribution", pod, db, topology.Client{}, all},
		{"no traffic distribution, option", stranger, db, topology.Client{Zone: "zb"}, all},
		{"zone-scoped", stranger, "zb.pin._zone." + web, topology.Client{}, []string{"10.0.0.3"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, _ := serveA(t, h, tt.src, tt.name, tt.option)
			if !slices.Equal(got, tt.want) {
				t.Errorf("%s from %v = %v, want %v", tt.name, tt.src, got, tt.want)
			}
		})
	}
	q, err := new(dns.Msg).SetQuestion(web, dns.TypeA).Pack()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.AnswerWire(nil, q); ok {
		t.Error("AnswerWire answered a name whose answer depends on the client")
	}
	q, _ = new(dns.Msg).SetQuestion(db, dns.TypeA).Pack()
	h.ServeDNS(&srcWriter{src: pod}, new(dns.Msg).SetQuestion(db, dns.TypeA))
	if _, ok := h.AnswerWire(make([]byte, 0, 512), q); !ok {
		t.Error("AnswerWire did not answer a cached name without variants")
	}
}

// TestServeDNSTopologyDrain drains the client's topology zone one
// endpoint at a time: the cached reply made for it goes with each change.
func TestServeDNSTopologyDrain(t *testing.T) {
	st := topoStore(t)
	h := NewHandler("cluster.local", st, WithReplyCache(1<<20), WithTopology(topology.DefaultOptionCode))
	pod := &net.UDPAddr{IP: net.ParseIP("10.0.0.9"), Port: 4000} // on n1, za
	ask := func() []string {
		w := &srcWriter{src: pod}
		h.ServeDNS(w, new(dns.Msg).SetQuestion("web.ns.svc.cluster.local.", dns.TypeA))
		var got []string
		for _, rr := range w.msg.Answer {
			got = append(got, rr.(*dns.A).A.String())
		}
		slices.Sort(got)
		return got
	}
	ports := []store.Port{{Name: "http", Protocol: "tcp", Port: 80}}
	ep := func(ip, host, zone string, ready bool) store.Endpoint {
		return store.Endpoint{Addresses: []netip.Addr{netip.MustParseAddr(ip)}, Hostname: host, Ready: ready, TopologyZone: zone}
	}
	steps := []struct {
		desc string
		eps  []store.Endpoint // nil: no change
		want []string
	}{
		{"before", nil, []string{"10.0.0.1", "10.0.0.2"}},
		{"one za endpoint goes", []store.Endpoint{ep("10.0.0.1", "web-0", "za", true), ep("10.0.0.3", "web-2", "zb", true)},
			[]string{"10.0.0.1"}},
		{"za drained", []store.Endpoint{ep("10.0.0.1", "web-0", "za", false), ep("10.0.0.3", "web-2", "zb", true)},
			[]string{"10.0.0.3"}},
	}
	for _, s := range steps {
		if s.eps != nil {
			st.SetEndpointSlice(store.EndpointSlice{Namespace: "ns", Name: "web-1", Service: "web", Ports: ports, Endpoints: s.eps})
			st.Publish()
		}
		for i := range 2 { // the second from the reply cache
			if got := ask(); !slices.Equal(got, s.want) {
				t.Errorf("%s (ask %d): %v, want %v", s.desc, i, got, s.want)
			}
		}
	}
}

// TestAutopathTopology: autopath answers each candidate with its variant
// for the client, placed by the option or by its pod, both for an
// autopath name and for a first search step expanded by source. These
// replies are never cached, so asking again gives the same.
func TestAutopathTopology(t *testing.T) {
	ap, err := WithAutopath(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler("cluster.local", snapRecords{topoSnapshot(t)}, WithReplyCache(1<<20),
		WithTopology(topology.DefaultOptionCode), ap, WithAutopathBySource())
	pod := &net.UDPAddr{IP: net.ParseIP("10.0.0.9"), Port: 4000}      // in ns, on n1, za
	stranger := &net.UDPAddr{IP: net.ParseIP("10.9.9.9"), Port: 4000} // no pod
	all := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}
	za := []string{"10.0.0.1", "10.0.0.2"}
	const apName = "web.search.ns.cluster.local.ap.k8s.io."
	tests := []struct {
		desc   string
		src    net.Addr
		name   string
		option topology.Client
		want   []string
	}{
		{"autopath, pod in za", pod, apName, topology.Client{}, za},
		{"autopath, stranger", stranger, apName, topology.Client{}, all},
		{"autopath, option zb", stranger, apName, topology.Client{Zone: "zb"}, []string{"10.0.0.3"}},
		{"autopath, pod in za again", pod, apName, topology.Client{}, za},
		// web.ns's first search step: its second candidate is web.ns.svc.cluster.local.
		{"by source, pod in za", pod, "web.ns.ns.svc.cluster.local.", topology.Client{}, za},
		{"by source, option zb", pod, "web.ns.ns.svc.cluster.local.", topology.Client{Zone: "zb"}, []string{"10.0.0.3"}},
		{"by source, pod in za again", pod, "web.ns.ns.svc.cluster.local.", topology.Client{}, za},
		{"no traffic distribution", pod, "db.search.ns.cluster.local.ap.k8s.io.", topology.Client{}, all},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, cname := serveA(t, h, tt.src, tt.name, tt.option)
			if !cname || !slices.Equal(got, tt.want) {
				t.Errorf("%s from %v = %v (CNAME %v), want %v behind a CNAME", tt.name, tt.src, got, cname, tt.want)
			}
		})
	}
}

// serveA asks h for the A records of name from src, with the topology
// option of c when it is known, and returns the sorted addresses of the
// answer and whether it holds a CNAME.
func serveA(t *testing.T, h *Handler, src net.Addr, name string, c topology.Client) (addrs []string, cname bool) {
	t.Helper()
	req := new(dns.Msg).SetQuestion(name, dns.TypeA)
	if c.Known() {
		topology.Add(req, topology.DefaultOptionCode, c)
	}
	w := &srcWriter{src: src}
	h.ServeDNS(w, req)
	if w.err != nil || w.msg == nil {
		t.Fatalf("reply %v, %v", w.msg, w.err)
	}
	for _, rr := range w.msg.Answer {
		switch v := rr.(type) {
		case *dns.A:
			addrs = append(addrs, v.A.String())
		case *dns.CNAME:
			cname = true
		}
	}
	slices.Sort(addrs)
	return addrs, cname
}
