package nodelocal

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// fakePod is a cluster DNS pod on loopback: it answers every A query
// with its own address and keeps the topology options it got.
type fakePod struct {
	*testkit.Upstream
	ip      string
	mu      sync.Mutex
	clients []topology.Client
	missing int // queries without a valid option
}

func newFakePod(t *testing.T, addr string) *fakePod {
	p := &fakePod{}
	p.ip, _, _ = net.SplitHostPort(addr)
	p.Upstream = testkit.NewUpstream(t, dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		c, ok := topology.Take(req, topology.DefaultOptionCode)
		p.mu.Lock()
		switch {
		case testkit.Probe(req.Question[0]):
			// The forwarder's health and loop probes carry no option.
		case ok:
			p.clients = append(p.clients, c)
		default:
			p.missing++
		}
		p.mu.Unlock()
		r := new(dns.Msg).SetReply(req)
		r.Answer = append(r.Answer, testkit.A(req.Question[0].Name, 30, p.ip))
		_ = w.WriteMsg(r)
	}), testkit.At(addr))
	return p
}

func (p *fakePod) options() ([]topology.Client, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]topology.Client(nil), p.clients...), p.missing
}

// zoneCluster is a node-local router on node-1 in topology zone-a, with
// the upstream Service's pods 127.0.0.2 (zone-a) and 127.0.0.3 (zone-b),
// and the Service address (127.0.0.1) last.
type zoneCluster struct {
	h          *Handler
	reg        *prometheus.Registry
	topo       *topologySetup
	local      *fakePod
	remote     *fakePod
	service    *fakePod
	client     *fake.Clientset
	slice      *discoveryv1.EndpointSlice
	localAddr  string
	remoteAddr string
}

func newZoneCluster(t *testing.T) *zoneCluster {
	t.Helper()
	z := &zoneCluster{local: newFakePod(t, "127.0.0.2:0")}
	_, port, _ := net.SplitHostPort(z.local.Addr)
	z.remote = newFakePod(t, "127.0.0.3:"+port)
	z.service = newFakePod(t, "127.0.0.1:0")
	z.localAddr, z.remoteAddr = z.local.Addr, z.remote.Addr
	var p int32
	fmt.Sscan(port, &p)
	z.slice = endpointSlice("kube-system", "dnsconfigurer-dns-upstream", p,
		sliceEndpoint("127.0.0.2", "zone-a", true), sliceEndpoint("127.0.0.3", "zone-b", true))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{topology.ZoneLabel: "zone-a"}}}
	// A slice of another Service: the watch must not see it.
	other := endpointSlice("kube-system", "other", p, sliceEndpoint("127.0.0.9", "zone-a", true))
	other.Name = "other-1"
	z.client = fake.NewClientset([]runtime.Object{node, z.slice, other}...)
	none := ""
	cfg := &v1alpha1.ServerConfiguration{Mode: v1alpha1.ModeNodeLocal,
		NodeLocal: v1alpha1.NodeLocal{ClusterUpstream: []string{z.service.Addr}, NodeName: "node-1", ResolvConf: &none}}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	log := testkit.Logger(t)
	z.reg = prometheus.NewRegistry()
	z.topo = newTopologySetup(cfg, z.client, []string{z.service.Addr}, log)
	ctx, cancel := context.WithCancel(context.Background())
	var closers []func()
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	})
	r, _, err := upstreams(ctx, cfg, z.topo, log, z.reg, &closers)
	if err != nil {
		t.Fatal(err)
	}
	go func() { defer close(done); _ = z.topo.watch.run(ctx) }()
	z.waitFirst(t, z.localAddr)
	z.h, err = New(r, Config{Registerer: z.reg, Logger: log}) // distinct names: every lookup is forwarded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(z.h.Close)
	return z
}

// waitFirst waits until addr heads the order, with the zone known.
func (z *zoneCluster) waitFirst(t *testing.T, addr string) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, func() error {
		ups := z.topo.ups.Upstreams()
		if len(ups) == 0 || ups[0] != addr || z.topo.client().Zone != "zone-a" {
			return fmt.Errorf("order %v, client %+v; want %s first", ups, z.topo.client(), addr)
		}
		return nil
	})
}

func endpointSlice(ns, svc string, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	tcp := corev1.ProtocolTCP
	name := "dns-tcp"
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &tcp}},
		Endpoints:   eps,
	}
}

func sliceEndpoint(ip, zone string, ready bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, Zone: &zone, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
}

// lookups asks n distinct names and returns the answers' addresses by
// count, and the failed lookups.
func (z *zoneCluster) lookups(t *testing.T, from, n int) (by map[string]int, failed int) {
	t.Helper()
	by = map[string]int{}
	for i := from; i < from+n; i++ {
		q := new(dns.Msg).SetQuestion(fmt.Sprintf("q%d.default.svc.cluster.local.", i), dns.TypeA)
		r := z.h.Answer(context.Background(), q, false)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			failed++
			continue
		}
		by[r.Answer[0].(*dns.A).A.String()]++
	}
	return by, failed
}

// TestZoneLocalKilled: lookups go to the zone-local pod while it serves;
// once it is killed (its sockets closed, no EndpointSlice change yet) the
// other zone's pod answers at once, then the Service address, and no
// lookup fails. Every forwarded query carries the node's topology.
func TestZoneLocalKilled(t *testing.T) {
	z := newZoneCluster(t)
	const n = 200
	by, failed := z.lookups(t, 0, n)
	if failed != 0 || by["127.0.0.2"] != n {
		t.Fatalf("before the kill: answers %v, %d failed; want %d from the zone-local pod", by, failed, n)
	}
	z.local.Stop()
	by, failed = z.lookups(t, n, n)
	if failed != 0 || by["127.0.0.3"] != n {
		t.Fatalf("after the kill: answers %v, %d failed; want %d from the other zone's pod", by, failed, n)
	}
	z.remote.Stop()
	by, failed = z.lookups(t, 2*n, n)
	if failed != 0 || by["127.0.0.1"] != n {
		t.Fatalf("both pods killed: answers %v, %d failed; want %d from the Service", by, failed, n)
	}
	m := testkit.Gather(t, z.reg)
	for zone, want := range map[string]float64{relSame: n, relOther: n, relService: n} {
		if got := m[testkit.Key("dnsconfigurer_nodelocal_cluster_upstream_answers_total", "zone", zone)]; got != want {
			t.Errorf("answers from zone %q: %v, want %v", zone, got, want)
		}
	}
	if got := m["dnsconfigurer_nodelocal_cluster_upstream_zone_endpoints"]; got != 1 {
		t.Errorf("zone-local endpoints %v, want 1", got)
	}
	want := topology.Client{Zone: "zone-a", Node: "node-1"}
	for _, p := range []*fakePod{z.local, z.remote, z.service} {
		clients, missing := p.options()
		if missing != 0 {
			t.Errorf("%s: %d queries without the topology option", p.ip, missing)
		}
		for _, c := range clients {
			if c != want {
				t.Fatalf("%s: topology option %+v, want %+v", p.ip, c, want)
			}
		}
	}
}

// TestZoneLocalNotReady: the order follows the EndpointSlice: a zone-local
// pod that is not ready is asked after the ready ones, and first again
// once ready.
func TestZoneLocalNotReady(t *testing.T) {
	z := newZoneCluster(t)
	update := func(localReady bool) {
		s := z.slice.DeepCopy()
		s.Endpoints[0] = sliceEndpoint("127.0.0.2", "zone-a", localReady)
		if _, err := z.client.DiscoveryV1().EndpointSlices(s.Namespace).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(false)
	z.waitFirst(t, z.remoteAddr)
	if by, failed := z.lookups(t, 0, 50); failed != 0 || by["127.0.0.3"] != 50 {
		t.Fatalf("zone-local pod not ready: answers %v, %d failed", by, failed)
	}
	if got := testkit.Gather(t, z.reg)["dnsconfigurer_nodelocal_cluster_upstream_zone_endpoints"]; got != 0 {
		t.Errorf("zone-local endpoints %v, want 0", got)
	}
	update(true)
	z.waitFirst(t, z.localAddr)
	if by, failed := z.lookups(t, 50, 50); failed != 0 || by["127.0.0.2"] != 50 {
		t.Fatalf("zone-local pod ready again: answers %v, %d failed", by, failed)
	}
}
