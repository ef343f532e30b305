package nodelocal

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/prom"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// Relations of an upstream to the node's topology zone (the answers
// metric's zone label).
const (
	relSame    = "same"    // a cluster DNS pod in the node's topology zone
	relOther   = "other"   // a cluster DNS pod elsewhere, or of unknown zone
	relService = "service" // a clusterUpstream address
)

// Endpoint is a cluster DNS pod of the upstream Service, as its
// EndpointSlice lists it.
type Endpoint struct {
	Addr         netip.AddrPort
	TopologyZone string
	Ready        bool
}

// clusterUpstreams is the cluster forwarder's upstream list: the ready
// endpoints in the node's topology zone, then the other ready ones, then
// the clusterUpstream addresses. The forwarder tries them in this order
// (forward.PolicySequential), so a failed or down endpoint costs one try.
type clusterUpstreams struct {
	static []string
	node   string
	cur    atomic.Pointer[upstreamOrder]
	local  prometheus.Gauge // ready endpoints in the node's zone (may be nil)
}

type upstreamOrder struct {
	addrs []string
	rel   map[string]string
}

func newClusterUpstreams(static []string, node string) *clusterUpstreams {
	u := &clusterUpstreams{static: slices.Clone(static), node: node}
	u.set("", nil)
	return u
}

// Upstreams implements forward.UpstreamSource.
func (u *clusterUpstreams) Upstreams() []string { return u.cur.Load().addrs }

// relation is addr's relation to the node's topology zone.
func (u *clusterUpstreams) relation(addr string) string {
	if r, ok := u.cur.Load().rel[addr]; ok {
		return r
	}
	return relOther
}

// set orders eps for a node in topology zone zone ("" unknown). Within a
// group the order is fixed per node, and differs between nodes, so that
// the nodes of a zone spread over its pods and each keeps its connections.
func (u *clusterUpstreams) set(zone string, eps []Endpoint) {
	type ranked struct {
		addr string
		same bool
		hash uint64
	}
	var rs []ranked
	for _, ep := range eps {
		if !ep.Ready || !ep.Addr.IsValid() {
			continue
		}
		a := ep.Addr.String()
		h := fnv.New64a()
		h.Write([]byte(u.node))
		h.Write([]byte{0})
		h.Write([]byte(a))
		rs = append(rs, ranked{addr: a, same: zone != "" && ep.TopologyZone == zone, hash: h.Sum64()})
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if a.same != b.same {
			if a.same {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.addr, b.addr))
	})
	o := &upstreamOrder{rel: map[string]string{}}
	local := 0
	for _, r := range rs {
		if _, dup := o.rel[r.addr]; dup {
			continue
		}
		rel := relOther
		if r.same {
			rel = relSame
			local++
		}
		o.addrs = append(o.addrs, r.addr)
		o.rel[r.addr] = rel
	}
	for _, a := range u.static {
		if _, dup := o.rel[a]; !dup {
			o.addrs = append(o.addrs, a)
			o.rel[a] = relService
		}
	}
	u.cur.Store(o)
	if u.local != nil {
		u.local.Set(float64(local))
	}
}

// topologyMetrics count the cluster DNS's answers by the answering
// upstream's relation to the node's topology zone.
type topologyMetrics struct {
	answers map[string]prometheus.Counter
	local   prometheus.Gauge
	options prometheus.Counter
}

func newTopologyMetrics(reg prometheus.Registerer) (*topologyMetrics, error) {
	m, err := prom.New(reg, "nodelocal", func(s *prom.Set) *topologyMetrics {
		vec := s.CounterVec("cluster_upstream_answers_total", "Replies of the cluster DNS, by the answering upstream's topology zone: same (the node's), other, or service (a nodeLocal.clusterUpstream address).", "zone")
		m := &topologyMetrics{answers: map[string]prometheus.Counter{},
			local:   s.Gauge("cluster_upstream_zone_endpoints", "Ready cluster DNS endpoints in the node's topology zone."),
			options: s.Counter("topology_options_total", "Queries forwarded to the cluster DNS with the topology option (the node's topology zone and name).")}
		for _, rel := range []string{relSame, relOther, relService} {
			m.answers[rel] = vec.WithLabelValues(rel)
		}
		return m
	})
	if err != nil {
		return nil, fmt.Errorf("register nodelocal topology metrics: %w", err)
	}
	return m, nil
}

// topologyCluster is the cluster DNS's exchanger: it adds the topology
// option and counts the answers by upstream. Only queries to the cluster
// DNS pass here, so the option never leaves the cluster from node-local.
type topologyCluster struct {
	fwd    Exchanger
	ups    *clusterUpstreams
	code   uint16
	client func() topology.Client
	m      *topologyMetrics
}

func (t *topologyCluster) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	return t.Forward(ctx, m, dnsmsg.Origin{})
}

// Forward is Exchange on behalf of o (forward.Forwarding).
func (t *topologyCluster) Forward(ctx context.Context, m *dns.Msg, o dnsmsg.Origin) (*dns.Msg, error) {
	if c := t.client(); c.Known() {
		m = withTopology(m, t.code, c)
		t.m.options.Inc()
	}
	ctx = forward.WithAnswered(ctx, func(up string) { t.m.answers[t.ups.relation(up)].Inc() })
	return forward.Ask(ctx, t.fwd, m, o)
}

// CheckLoop passes the cache's loop check on (dnscache.LoopChecker).
func (t *topologyCluster) CheckLoop(req *dns.Msg) error {
	if lc, ok := t.fwd.(interface{ CheckLoop(*dns.Msg) error }); ok {
		return lc.CheckLoop(req)
	}
	return nil
}

// withTopology is a shallow copy of m whose OPT carries c under code; m
// is not modified.
func withTopology(m *dns.Msg, code uint16, c topology.Client) *dns.Msg {
	out := *m
	out.Extra = make([]dns.RR, 0, len(m.Extra)+1)
	for _, rr := range m.Extra {
		if opt, ok := rr.(*dns.OPT); ok {
			o := *opt
			o.Option = slices.DeleteFunc(slices.Clone(opt.Option), func(e dns.EDNS0) bool { return e.Option() == code })
			rr = &o
		}
		out.Extra = append(out.Extra, rr)
	}
	topology.Add(&out, code, c)
	return &out
}

// topologySetup is the stage's topology part: the cluster upstreams, the
// watch that orders them (nil without an API server or node name), and
// the client the topology option carries.
type topologySetup struct {
	ups    *clusterUpstreams
	watch  *zoneWatch
	client func() topology.Client
}

// newTopologySetup follows the upstream Service's endpoints when kube is
// set, nodeName known and preferZone on; with kube and nodeName it reads
// the node's zone for the option in any case.
func newTopologySetup(cfg *v1alpha1.ServerConfiguration, kube kubernetes.Interface, static []string, log *slog.Logger) *topologySetup {
	nl := &cfg.NodeLocal
	t := &topologySetup{ups: newClusterUpstreams(static, nl.NodeName)}
	node := topology.Client{Node: nl.NodeName}
	t.client = func() topology.Client { return node }
	switch {
	case kube == nil:
		if nl.PreferZoneOn() {
			log.Info("no API server: nodeLocal.preferZone is off, the cluster DNS is asked at nodeLocal.clusterUpstream")
		}
		return t
	case nl.NodeName == "":
		log.Warn("nodeLocal.nodeName (--node-name, $NODE_NAME) unset: the node's topology zone is unknown, the cluster DNS is asked at nodeLocal.clusterUpstream")
		return t
	}
	ns, svc := nl.UpstreamServiceName()
	t.watch = &zoneWatch{client: kube, node: nl.NodeName, namespace: ns, service: svc, ups: t.ups,
		follow: nl.PreferZoneOn(), jitter: nl.WatchJitter.Duration(), log: log.With("upstreamService", ns+"/"+svc)}
	t.client = t.watch.topoClient
	return t
}
