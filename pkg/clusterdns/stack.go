package clusterdns

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hosts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nsmetrics"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/template"
)

// answerStack is what a reload of the config file replaces: the handler
// with its static records and autopath, their background work (the hosts
// watcher) and their metrics, on a registry of their own; and its
// forwarding part, which a reload that leaves the forwarding settings as
// they were carries over.
type answerStack struct {
	handler *Handler
	reg     *prometheus.Registry
	fwd     *forwarding // nil without forward routes
	cancel  context.CancelFunc
	closers []func()
}

// forwarding is the forwarders of the routes behind the answer cache, their
// background work (health and loop probes, resolv.conf watchers) and their
// metrics, on a registry of their own; key is the config it was built from.
type forwarding struct {
	key     string
	cache   *dnscache.Cache
	reg     *prometheus.Registry
	cancel  context.CancelFunc
	closers []func()
	// watched is one watcher per resolv.conf path: routes that name the
	// same file share it (and its metrics).
	watched map[string]*hostresolv.Watcher
}

// stop ends the forwarding's background work and releases its sockets.
func (f *forwarding) stop() {
	f.cancel()
	for _, c := range f.closers {
		c()
	}
}

// forwardingKey is what the forwarding part is built from: the routes, the
// concurrency bound and the cache settings (defaults set), and the listen
// addresses (never forwarded to).
func forwardingKey(cfg *v1alpha1.ServerConfiguration) string {
	b, err := json.Marshal(struct {
		Forward       []v1alpha1.ForwardRoute
		MaxConcurrent int
		FailFast      bool
		ShedRcode     string
		Cache         v1alpha1.ServerCache
		Listen        []string
	}{cfg.Forward, cfg.MaxConcurrent, cfg.FailFastAllUnhealthy, cfg.ShedRcode, cfg.Cache, cfg.Listen})
	if err != nil {
		return "" // never equal to a running key: rebuilt
	}
	return string(b)
}

// stop ends the stack's background work and releases its sockets.
func (s *answerStack) stop() { s.stopKeeping(nil) }

// stopKeeping is stop, leaving keep (the forwarding part the next stack
// carried over) running.
func (s *answerStack) stopKeeping(keep *forwarding) {
	s.cancel()
	for _, c := range s.closers {
		c()
	}
	if s.fwd != nil && s.fwd != keep {
		s.fwd.stop()
	}
}

// gatherers are the stack's registries.
func (s *answerStack) gatherers() prometheus.Gatherers {
	if s.fwd == nil {
		return prometheus.Gatherers{s.reg}
	}
	return prometheus.Gatherers{s.reg, s.fwd.reg}
}

// stores are the record stores a stack answers from: the cluster's, and
// the clusterset zone's (nil when clustersetZone is off).
type stores struct {
	cluster, clusterset *store.Store
	localCluster        func() string // the clusterset feed's: this cluster's ID
}

// buildStack makes the answer stack of cfg over the record store, with
// prev's forwarding part when cfg's forwarding settings are those prev was
// built from (a reload; nil at start). On error everything it started is
// stopped (prev's forwarding part excepted).
func buildStack(ctx context.Context, cfg *v1alpha1.ServerConfiguration, st stores, log *slog.Logger, prev *forwarding) (_ *answerStack, err error) {
	sctx, cancel := context.WithCancel(ctx)
	s := &answerStack{reg: prometheus.NewRegistry(), cancel: cancel}
	defer func() {
		if err != nil {
			s.stopKeeping(prev)
		}
	}()
	opts := []Option{WithLogger(log), WithLoadBalance(cfg.LoadbalanceEnabled()), WithUDPAnswerLimit(cfg.UDPAnswerLimit),
		WithReplyCache(cfg.Cache.ZoneBytes.Bytes()), WithWireMisses()}
	if prefixes := cfg.ReverseZonePrefixes(); len(prefixes) > 0 {
		rz, err := WithReverseZones(prefixes)
		if err != nil {
			return nil, v1alpha1.ConfigErrorf("reverseZones: %v", err)
		}
		opts = append(opts, rz)
	}
	if cfg.NoClusterZone {
		opts = append(opts, WithoutClusterZone())
	}
	if scope := cfg.ReverseScopePrefixes(); len(scope) > 0 {
		opts = append(opts, WithReverseScope(scope))
	}
	if len(cfg.Rewrites) > 0 {
		rw, err := WithRewrites(cfg.Rewrites)
		if err != nil {
			return nil, v1alpha1.ConfigErrorf("%v", err)
		}
		opts = append(opts, rw)
	}
	if cfg.AutopathEnabled() {
		ap, err := WithAutopath(uint16(cfg.AutopathOptionCode), s.reg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, ap)
		if cfg.AutopathBySource {
			opts = append(opts, WithAutopathBySource())
		}
	}
	opts = append(opts, WithTopology(uint16(cfg.TopologyOptionCode)))
	if n := cfg.TopNamespaces(); n > 0 {
		amp, err := nsmetrics.New(n, cfg.ClusterDomain, st.cluster)
		if err != nil {
			return nil, v1alpha1.ConfigErrorf("namespaceMetrics: %v", err)
		}
		if err := s.reg.Register(amp); err != nil {
			return nil, err
		}
		opts = append(opts, WithAmplification(amp))
	}
	if len(cfg.Forward) > 0 {
		if key := forwardingKey(cfg); prev != nil && key != "" && prev.key == key {
			s.fwd = prev
		} else {
			// Its own context: it may outlive this stack.
			fctx, fcancel := context.WithCancel(ctx)
			s.fwd = &forwarding{key: key, reg: prometheus.NewRegistry(), cancel: fcancel}
			if err := s.fwd.build(fctx, cfg, log); err != nil {
				return nil, err
			}
		}
		opts = append(opts, WithAnswerCache(s.fwd.cache), WithDelegations(delegations(cfg)))
	}
	if cfg.Hosts.File != "" || len(cfg.Overrides) > 0 {
		static, err := s.static(sctx, cfg, log)
		if err != nil {
			return nil, err
		}
		if s.fwd != nil {
			static = cappedStatic{static, s.fwd.cache.MaxTTL}
		}
		opts = append(opts, WithStatic(static))
	}
	if len(cfg.Templates) > 0 {
		ts, err := template.Compile(cfg.Templates)
		if err != nil {
			return nil, v1alpha1.ConfigErrorf("%v", err)
		}
		var maxTTL func(string) (time.Duration, bool)
		if s.fwd != nil {
			maxTTL = s.fwd.cache.MaxTTL
		}
		opts = append(opts, WithTemplates(ts, maxTTL))
	}
	if x := cfg.External; x != nil && len(x.Zones) > 0 {
		opts = append(opts, WithExternal(x.Zones, x.Apex, uint32(x.TTLValue()), x.Fallthrough))
	}
	if st.clusterset != nil {
		opts = append(opts, WithClusterset(st.clusterset, st.localCluster))
	}
	s.handler = NewHandler(cfg.ClusterDomain, st.cluster, opts...)
	return s, nil
}

// build makes the forward routes of cfg (one Forwarder each, behind a
// Router when there are several) behind the answer cache.
func (f *forwarding) build(ctx context.Context, cfg *v1alpha1.ServerConfiguration, log *slog.Logger) error {
	var routes []forward.Route
	for i, r := range cfg.Forward {
		source, err := f.upstreams(ctx, r, log)
		if err != nil {
			return v1alpha1.ConfigErrorf("forward[%d].upstreams: %v", i, err)
		}
		maxFails := r.MaxFailsValue()
		if maxFails == 0 { // the file's "never out of rotation"
			maxFails = forward.NoHealthCheck
		}
		var tc *tls.Config
		if t := r.TLS; t != nil {
			if tc, err = forward.LoadTLS(forward.TLSFiles{ServerName: t.ServerName, CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile}); err != nil {
				return v1alpha1.ConfigErrorf("forward[%d].tls.%v", i, err)
			}
		}
		fwd, err := forward.Start(ctx, forward.Config{Upstreams: source, Self: cfg.Listen, TLS: tc,
			Timeout: r.Timeout.Duration(), Policy: r.Policy, MaxFails: maxFails,
			HealthCheck: r.HealthCheck.Duration(), Expire: r.Expire.Duration(),
			ForceTCP: r.ForceTCP, PreferUDP: r.PreferUDP, MaxConcurrent: cfg.MaxConcurrent, FailFastAllUnhealthy: cfg.FailFastAllUnhealthy,
			ShedRcode: cfg.ShedRcodeValue(), Zone: r.ZoneName(), Logger: log.With("forward", r.ZoneName())}, f.reg)
		if err != nil {
			return v1alpha1.ConfigErrorf("forward[%d]: %v", i, err)
		}
		f.closers = append(f.closers, func() { _ = fwd.Close() })
		if len(fwd.Upstreams()) == 0 {
			log.Warn("no usable upstream: names of the zone are answered SERVFAIL", "zone", r.ZoneName(), "upstreams", source.Upstreams(),
				"reasons", unusableUpstreams(source.Upstreams(), cfg.Listen))
		}
		routes = append(routes, forward.Route{Zone: r.ZoneName(), Except: r.ExceptNames(), Upstream: fwd})
	}
	router, err := forward.NewRouter(routes)
	if err != nil {
		return v1alpha1.ConfigErrorf("forward: %v", err)
	}
	cc := dnscache.ConfigOf(cfg.Cache, cfg.Forward...)
	cc.Server, cc.Logger = "cluster", log
	cache, err := dnscache.New(router, cc)
	if err != nil {
		return v1alpha1.ConfigErrorf("cache: %v", err)
	}
	f.closers = append(f.closers, cache.Close)
	f.cache = cache
	return f.reg.Register(cache)
}

// unusableUpstreams says why the Forwarder of a route kept none of raw,
// its upstreams, for a server listening on listen: the rule of
// forward.SelfReason (an upstream equal to a listen address, or a
// loopback upstream on the port of an unspecified listen address, is
// taken for the server itself; a loopback neighbour such as 127.0.0.53
// beside 127.0.0.1:53 is not), an upstream that is no address, or an
// empty list.
func unusableUpstreams(raw, listen []string) []string {
	if len(raw) == 0 {
		return []string{"the list of upstreams is empty (a resolv.conf without nameserver lines)"}
	}
	var out []string
	for _, s := range raw {
		up, _, err := forward.ParseUpstream(s)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: not an address: %v", s, err))
			continue
		}
		why := forward.SelfReason(up, listen)
		if why == "" {
			why = "a repeat of an earlier upstream"
		}
		out = append(out, up.String()+": "+why)
	}
	return out
}

// upstreams is a route's upstream source: its addresses (plain or
// tls://), with the nameservers of its watched resolv.conf in the place of
// its path, as CoreDNS lists them (the last good file is kept while it is
// broken; loopback nameservers stay: the Forwarder drops only the server's
// own addresses).
func (f *forwarding) upstreams(ctx context.Context, r v1alpha1.ForwardRoute, log *slog.Logger) (forward.UpstreamSource, error) {
	path := r.ResolvConf()
	if path == "" {
		return forward.StaticUpstreams(slices.Clone(r.Upstreams)), nil
	}
	w, ok := f.watched[path]
	if !ok {
		var err error
		w, err = hostresolv.Watch(ctx, path, hostresolv.WithLogger(log), hostresolv.WithRegistry(f.reg), hostresolv.ForUpstreams())
		if err != nil {
			return nil, err
		}
		if f.watched == nil {
			f.watched = map[string]*hostresolv.Watcher{}
		}
		f.watched[path] = w
		f.closers = append(f.closers, func() { <-w.Done() })
	}
	if snap := w.Current(); snap.Err != nil {
		return nil, fmt.Errorf("%q: %w", path, snap.Err)
	}
	if len(r.Upstreams) == 1 {
		return forward.UpstreamFunc(func() []string { return w.Current().Raw.Nameservers }), nil
	}
	at := slices.Index(r.Upstreams, path)
	return &mixedUpstreams{w: w, before: r.Upstreams[:at], after: r.Upstreams[at+1:]}, nil
}

// mixedUpstreams are a route's addresses around the nameservers of its
// resolv.conf; the list is built again only when the file changed.
type mixedUpstreams struct {
	w             *hostresolv.Watcher
	before, after []string
	cur           atomic.Pointer[mixedList]
}

type mixedList struct{ ns, all []string }

// Upstreams implements forward.UpstreamSource.
func (m *mixedUpstreams) Upstreams() []string {
	ns := m.w.Current().Raw.Nameservers
	if l := m.cur.Load(); l != nil && slices.Equal(l.ns, ns) {
		return l.all
	}
	l := &mixedList{ns: ns, all: slices.Concat(m.before, ns, m.after)}
	m.cur.Store(l)
	return l.all
}

// static is the hosts file (watched) and the overrides.
func (s *answerStack) static(ctx context.Context, cfg *v1alpha1.ServerConfiguration, log *slog.Logger) (Static, error) {
	hc := hosts.Config{TTL: cfg.Hosts.TTL.Duration()}
	for i, o := range cfg.Overrides {
		var addrs []netip.Addr
		for _, a := range o.Addresses {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				return nil, v1alpha1.ConfigErrorf("overrides[%d].addresses: %v", i, err)
			}
			addrs = append(addrs, ip)
		}
		hc.Overrides = append(hc.Overrides, hosts.Override{Name: o.Name, Addresses: addrs, TTL: o.TTL.Duration()})
	}
	if cfg.Hosts.File == "" {
		t, err := hosts.NewTable(hc)
		if err != nil {
			return nil, v1alpha1.ConfigErrorf("overrides: %v", err)
		}
		return t, nil
	}
	src, err := hosts.NewSource(ctx, cfg.Hosts.File, hc, hosts.WithLogger(log), hosts.WithInterval(cfg.Hosts.Reload.Duration()))
	if err != nil {
		return nil, v1alpha1.ConfigErrorf("hosts: %v", err)
	}
	if err := s.reg.Register(src); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx) }()
	s.closers = append(s.closers, func() { <-done })
	return src, nil
}

// stackGatherer gathers the process-wide registry and the current answer
// stack's (a reload starts the stack's counters again from zero, which
// Prometheus's rate() reads as a counter reset; the forwarders' and the
// cache's carry on when the reload kept them).
type stackGatherer struct {
	main *prometheus.Registry
	cur  atomic.Pointer[answerStack]
}

func (g *stackGatherer) Gather() ([]*dto.MetricFamily, error) {
	gs := prometheus.Gatherers{g.main}
	if s := g.cur.Load(); s != nil {
		gs = append(gs, s.gatherers()...)
	}
	return gs.Gather()
}

// retireAfter stops a replaced stack, but not the forwarding part its
// successor kept, once the queries it may still be answering have had their
// forwarding timeout.
func retireAfter(old *answerStack, keep *forwarding, d time.Duration) {
	time.AfterFunc(d, func() { old.stopKeeping(keep) })
}

// delegations are the forward routes' zones inside the cluster domain.
func delegations(cfg *v1alpha1.ServerConfiguration) []string {
	var zs []string
	for i := range cfg.Forward {
		if z := cfg.Forward[i].ZoneName(); inZone(z, cfg.ClusterZone()) {
			zs = append(zs, z)
		}
	}
	return zs
}
