package nodelocal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/filewatch"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// clusterConfig is the cluster DNS's configuration of the routing tests:
// a stub domain, a default route excepting a name, an override and
// rewrites of every bounded kind.
func clusterConfig() *v1alpha1.ServerConfiguration {
	c := &v1alpha1.ServerConfiguration{
		ClustersetZone: "clusterset.local",
		Forward: []v1alpha1.ForwardRoute{
			{Zone: ".", Upstreams: []string{"10.0.0.53"}, Except: []string{"Blocked.Example"}},
			{Zone: "Corp.Example.", Upstreams: []string{"10.0.1.53"}},
		},
		Overrides: []v1alpha1.Override{{Name: "host.minikube.internal", Addresses: []string{"192.168.49.1"}}},
		Rewrites: []v1alpha1.Rewrite{
			{Match: "exact", From: "old.example.org", To: "new.example.org"},
			{Match: "suffix", From: ".legacy.internal", To: ".svc.cluster.local"},
			{Match: "suffix", From: "shop.example.net", To: "shop.example.com"},
		},
	}
	c.SetDefaults()
	return c
}

func withHosts(c *v1alpha1.ServerConfiguration) *v1alpha1.ServerConfiguration {
	c.Hosts.File = "/etc/dnsconfigurer/hosts"
	return c
}

// TestRoutes: which names go to the cluster DNS, by the cluster DNS's
// configuration.
func TestRoutes(t *testing.T) {
	hostsNames := slices.Values([]string{"nas.home.", "1.2.168.192.in-addr.arpa."})
	tests := []struct {
		name    string
		cl      *v1alpha1.ServerConfiguration
		cluster []string // names sent to the cluster DNS
		direct  []string // names sent to the node's nameservers
	}{
		{"no cluster configuration", nil,
			[]string{"web.prod.svc.cluster.local.", "CLUSTER.LOCAL", "x.search.prod.cluster.local.ap.k8s.io.", "10.0.96.10.in-addr.arpa.",
				"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa."},
			[]string{"www.example.com.", "corp.example.", "local.", "notcluster.local.", ".", "ap.k8s.io.example.", "nas.home."}},
		{"stub domains, excepts, overrides, hosts, rewrites", withHosts(clusterConfig()),
			[]string{"corp.example.", "db.CORP.example.", "blocked.example.", "www.blocked.example.", "host.minikube.internal.",
				"nas.home.", "old.example.org.", "a.b.legacy.internal.", "legacy.internal.", "shop.example.net.", "myshop.example.net.",
				"web.prod.svc.cluster.local.", "web.prod.svc.clusterset.local.", "ClusterSet.Local."},
			[]string{"www.example.com.", "example.", "xcorp.example.", "other.clusterset.example.", "www.host.minikube.internal.", "other.home.",
				"www.old.example.org.", "example.org.", "legacyinternal.", "example.com."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRoutes("cluster.local", tt.cl, hostsNames, nil)
			if len(r.Unbounded()) > 0 {
				t.Fatalf("unbounded: %v", r.Unbounded())
			}
			for _, n := range tt.cluster {
				if !r.Cluster(n) {
					t.Errorf("%q: direct, want cluster", n)
				}
			}
			for _, n := range tt.direct {
				if r.Cluster(n) {
					t.Errorf("%q: cluster, want direct", n)
				}
			}
		})
	}
}

// TestRoutesUnbounded: a rule no zone bounds sends every name to the
// cluster DNS, and says why.
func TestRoutesUnbounded(t *testing.T) {
	tests := []struct {
		name   string
		change func(*v1alpha1.ServerConfiguration)
		why    string
	}{
		{"prefix", func(c *v1alpha1.ServerConfiguration) {
			c.Rewrites = append(c.Rewrites, v1alpha1.Rewrite{Match: "prefix", From: "old-", To: "new-"})
		}, `rewrites[3]: match "prefix" cannot be bounded to a zone`},
		{"substring", func(c *v1alpha1.ServerConfiguration) {
			c.Rewrites = []v1alpha1.Rewrite{{Match: "substring", From: "-canary.", To: "."}}
		}, `rewrites[0]: match "substring" cannot be bounded to a zone`},
		{"regex", func(c *v1alpha1.ServerConfiguration) {
			c.Rewrites = []v1alpha1.Rewrite{{Match: "regex", From: `^(.+)\.consul\.$`, To: "{1}.svc.cluster.local"}}
		}, `rewrites[0]: match "regex" cannot be bounded to a zone`},
		{"suffix of a top-level label", func(c *v1alpha1.ServerConfiguration) {
			c.Rewrites = []v1alpha1.Rewrite{{Match: "suffix", From: "com", To: "org"}}
		}, `rewrites[0]: suffix "com" matches names in every zone`},
		{"hosts file unreadable", func(c *v1alpha1.ServerConfiguration) { c.Hosts.File = "/etc/dnsconfigurer/hosts" },
			`hosts.file "/etc/dnsconfigurer/hosts": gone`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clusterConfig()
			tt.change(c)
			r := NewRoutes("cluster.local", c, nil, errors.New("gone"))
			if !slices.Contains(r.Unbounded(), tt.why) {
				t.Errorf("unbounded %q, want %q", r.Unbounded(), tt.why)
			}
			for _, n := range []string{"www.example.com.", "anything.", "."} {
				if !r.Cluster(n) {
					t.Errorf("%q: direct, want cluster", n)
				}
			}
		})
	}
}

// TestRouter: with external "direct" the routes split the names; with
// "cluster" (no external upstream) every name goes to the cluster DNS;
// both are counted by upstream.
func TestRouter(t *testing.T) {
	for _, tt := range []struct {
		name     string
		external Exchanger
		want     map[string]string
	}{
		{"direct", testkit.Named("direct"), map[string]string{"corp.example.": "cluster", "web.prod.svc.cluster.local.": "cluster", "www.example.com.": "direct"}},
		{"cluster", nil, map[string]string{"corp.example.": "cluster", "www.example.com.": "cluster"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := newRouteMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			r := &router{cluster: testkit.Named("cluster"), external: tt.external, m: m}
			r.routes.Store(NewRoutes("cluster.local", clusterConfig(), nil, nil))
			counts := map[string]float64{}
			for name, want := range tt.want {
				reply, err := r.Exchange(context.Background(), new(dns.Msg).SetQuestion(name, dns.TypeA))
				if err != nil {
					t.Fatal(err)
				}
				if got := reply.Answer[0].(*dns.TXT).Txt[0]; got != want {
					t.Errorf("%s went to %s, want %s", name, got, want)
				}
				counts[want]++
			}
			if got := testutil.ToFloat64(m.toCluster); got != counts["cluster"] {
				t.Errorf("forwarded_total{upstream=cluster} = %v, want %v", got, counts["cluster"])
			}
			if got := testutil.ToFloat64(m.toDirect); got != counts["direct"] {
				t.Errorf("forwarded_total{upstream=direct} = %v, want %v", got, counts["direct"])
			}
			if _, err := r.Exchange(context.Background(), new(dns.Msg)); err == nil {
				t.Error("a query without a question was forwarded")
			}
		})
	}
}

// loadFile is serve's loader for the tests: strict YAML, kind, defaults,
// validation.
func loadFile(path string) (*v1alpha1.ServerConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c := &v1alpha1.ServerConfiguration{}
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		return nil, err
	}
	if err := c.CheckKind(v1alpha1.ServerKind); err != nil {
		return nil, err
	}
	c.SetDefaults()
	return c, c.Validate()
}

const configHead = "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\n"

// TestFollower: the routes follow the file and its hosts file; a bad
// file keeps the last good routes and is counted; a hosts file never read
// sends every name to the cluster DNS until it is.
func TestFollower(t *testing.T) {
	dir := t.TempDir()
	path, hostsPath := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "hosts")
	testkit.WriteAtomic(t, path, configHead+"forward:\n- zone: corp.example\n  upstreams: [10.0.1.53]\n")
	m, err := newRouteMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r := &router{cluster: testkit.Named("cluster"), external: testkit.Named("direct"), m: m}
	f := &follower{path: path, load: loadFile, domain: "cluster.local", r: r, log: slog.New(slog.NewTextHandler(&testkit.Buffer{}, nil)), m: m}
	cluster := func(name string) bool { return r.routes.Load().Cluster(name) }
	if err := f.reload(); err != nil {
		t.Fatal(err)
	}
	if !cluster("db.corp.example.") || cluster("nas.home.") {
		t.Fatal("routes of the first file")
	}
	steps := []struct {
		name    string
		write   func()
		err     string
		cluster []string
		direct  []string
		bad     float64
	}{
		{"invalid: kept", func() { testkit.WriteAtomic(t, path, configHead+"forward:\n- zone: corp..example\n") }, "forward[0].zone",
			[]string{"db.corp.example."}, []string{"nas.home."}, 1},
		{"node-local's own file: kept", func() { testkit.WriteAtomic(t, path, configHead+"mode: node-local\n") }, "not the cluster DNS's configuration",
			[]string{"db.corp.example."}, []string{"nas.home."}, 2},
		{"missing: kept", func() { os.Remove(path) }, "no such file",
			[]string{"db.corp.example."}, []string{"nas.home."}, 3},
		{"hosts file missing: every name", func() { testkit.WriteAtomic(t, path, configHead+"hosts: {file: "+hostsPath+"}\n") }, "",
			[]string{"nas.home.", "www.example.com."}, nil, 3},
		{"hosts file read", func() { testkit.WriteAtomic(t, hostsPath, "192.168.2.1 nas.home\n") }, "",
			[]string{"nas.home.", "1.2.168.192.in-addr.arpa."}, []string{"www.example.com.", "db.corp.example."}, 3},
		{"hosts file gone: last good names", func() { os.Remove(hostsPath) }, "",
			[]string{"nas.home."}, []string{"www.example.com."}, 3},
	}
	for _, st := range steps {
		st.write()
		err := f.reload()
		if (err == nil) != (st.err == "") || (err != nil && !strings.Contains(err.Error(), st.err)) {
			t.Fatalf("%s: reload error %v, want %q", st.name, err, st.err)
		}
		for _, n := range st.cluster {
			if !cluster(n) {
				t.Errorf("%s: %q direct, want cluster", st.name, n)
			}
		}
		for _, n := range st.direct {
			if cluster(n) {
				t.Errorf("%s: %q cluster, want direct", st.name, n)
			}
		}
		if got := testutil.ToFloat64(m.configErrors); got != st.bad {
			t.Errorf("%s: cluster_config_errors_total = %v, want %v", st.name, got, st.bad)
		}
		ok := 1.0
		if st.err != "" {
			ok = 0
		}
		if got := testutil.ToFloat64(m.configOK); got != ok {
			t.Errorf("%s: cluster_config_last_read_ok = %v, want %v", st.name, got, ok)
		}
	}
}

// TestFollowerWatch: a change of the file, made as a ConfigMap volume
// makes it (a new ..data link renamed over the old one), is in service
// without a restart.
func TestFollowerWatch(t *testing.T) {
	dir := t.TempDir()
	swap := func(gen int, content string) {
		data := filepath.Join(dir, fmt.Sprintf("..%d", gen))
		if err := os.Mkdir(data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "config.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(filepath.Base(data), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	swap(1, configHead)
	path := filepath.Join(dir, "config.yaml")
	if err := os.Symlink("..data/config.yaml", path); err != nil {
		t.Fatal(err)
	}
	m, err := newRouteMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r := &router{cluster: testkit.Named("cluster"), external: testkit.Named("direct"), m: m}
	f := &follower{path: path, load: loadFile, domain: "cluster.local", r: r, log: slog.New(slog.DiscardHandler), m: m,
		opts: []filewatch.Option{filewatch.WithDebounce(10*time.Millisecond, 100*time.Millisecond), filewatch.WithPoll(50 * time.Millisecond)}}
	if err := f.reload(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	if r.routes.Load().Cluster("db.corp.example.") {
		t.Fatal("corp.example routed before it is configured")
	}
	swap(2, configHead+"forward:\n- zone: corp.example\n  upstreams: [10.0.1.53]\n")
	testkit.WaitFor(t, 10*time.Second, func() error {
		if !r.routes.Load().Cluster("db.corp.example.") {
			return errors.New("corp.example not routed to the cluster DNS yet")
		}
		return nil
	})
}

// BenchmarkRoutes is the per-query routing decision of a name outside
// every route, with 10,000 hosts names and a few zones: a map lookup per
// label, no allocation.
func BenchmarkRoutes(b *testing.B) {
	names := make([]string, 0, 10000)
	for i := range 10000 {
		names = append(names, fmt.Sprintf("host-%d.home.", i))
	}
	r := NewRoutes("cluster.local", clusterConfig(), slices.Values(names), nil)
	for _, tc := range []struct{ name, q string }{
		{"direct", "www.Example.com."},
		{"cluster", "web.prod.svc.cluster.local."},
		{"hosts", "host-9999.home."},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Cluster(tc.q)
			}
		})
	}
}

// TestRoutesAllocateNothing: the routing decision allocates nothing, for
// lowercase and mixed-case names.
func TestRoutesAllocateNothing(t *testing.T) {
	r := NewRoutes("cluster.local", clusterConfig(), nil, nil)
	for _, q := range []string{"www.example.com.", "WWW.Corp.Example.", "web.prod.svc.cluster.local"} {
		if n := testing.AllocsPerRun(100, func() { r.Cluster(q) }); n != 0 {
			t.Errorf("%q: %v allocations", q, n)
		}
	}
}

// BenchmarkRouteDecision compares the routing decision of a forwarded
// query before (a forward.Router of the cluster zones and ".") and now
// (Routes.Cluster, with the cluster DNS's configuration), for a name
// outside the cluster and one inside.
func BenchmarkRouteDecision(b *testing.B) {
	routes := []forward.Route{{Zone: "cluster.local", Upstream: testkit.Named("cluster")}, {Zone: ".", Upstream: testkit.Named("direct")}}
	for _, z := range dnsserver.ClusterZones {
		routes = append(routes, forward.Route{Zone: z, Upstream: testkit.Named("cluster")})
	}
	fr, err := forward.NewRouter(routes)
	if err != nil {
		b.Fatal(err)
	}
	r := NewRoutes("cluster.local", clusterConfig(), nil, nil)
	for _, q := range []string{"www.example.com.", "web.prod.svc.cluster.local."} {
		b.Run("forward.Router/"+q, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				fr.Route(q)
			}
		})
		b.Run("Routes/"+q, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Cluster(q)
			}
		})
	}
}
