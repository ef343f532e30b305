package v1alpha1

import (
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// decodeServer is internal/flaglayer's ReadFile on bytes: strict YAML,
// kind check, defaults, validation.
func decodeServer(data []byte) (*ServerConfiguration, error) {
	c := &ServerConfiguration{}
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		return nil, err
	}
	if err := c.CheckKind(ServerKind); err != nil {
		return nil, err
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func TestServerDefaults(t *testing.T) {
	c := defaulted[ServerConfiguration](t)
	if err := c.CheckComplete(); err == nil || err.Error() != `listen: required: at least one address such as "0.0.0.0:53" (or nodeLocal.localIPs)` {
		t.Errorf("CheckComplete of the defaults = %v, want listen required", err)
	}
	got := map[string]any{
		"mode": c.Mode, "clusterDomain": c.ClusterDomain, "ClusterZone": c.ClusterZone(), "logLevel": c.LogLevel, "logFormat": c.LogFormat,
		"pods": c.Pods, "RecordTTL": c.RecordTTL(), "autopath": c.AutopathEnabled(), "autopathOptionCode": c.AutopathOptionCode,
		"TopNamespaces": c.TopNamespaces(), "coreDNSMetrics": c.CoreDNSMetrics,
		"maxConcurrent": c.MaxConcurrent, "shedRcode": c.ShedRcode, "ShedRcodeValue": c.ShedRcodeValue(),
		"cache.successBytes": c.Cache.SuccessBytes.Bytes(), "cache.denialBytes": c.Cache.DenialBytes.Bytes(),
		"cache.zoneBytes": c.Cache.ZoneBytes.Bytes(),
		"cache.maxTTL":    c.Cache.MaxTTL.Duration(), "cache.minTTL": c.Cache.MinTTL.Duration(),
		"cache.maxNegativeTTL": c.Cache.MaxNegativeTTL.Duration(), "cache.minNegativeTTL": c.Cache.MinNegativeTTL.Duration(),
		"cache.serveStale": c.Cache.ServeStale.Duration(), "cache.staleTTL": c.Cache.StaleTTL.Duration(),
		"cache.prefetch.amount": c.Cache.Prefetch.Amount, "cache.prefetch.window": c.Cache.Prefetch.Window.Duration(),
		"cache.prefetch.percentage": c.Cache.Prefetch.Percentage,
		"loadbalance":               c.LoadbalanceEnabled(), "hosts.ttl": c.Hosts.TTL.Duration(), "hosts.reload": c.Hosts.Reload.Duration(),
		"udpAnswerLimit": c.UDPAnswerLimit,
		"lameduck":       c.Lameduck.Duration(), "udpSockets": c.UDPSockets, "limits.udpInFlight": c.Limits.UDPInFlight, "limits.tcpConnections": c.Limits.TCPConnections,
		"limits.tcpConnectionsPerClient": c.Limits.TCPConnectionsPerClient,
		"limits.tcpIdleTimeout":          c.Limits.TCPIdleTimeout.Duration(), "limits.tcpWriteTimeout": c.Limits.TCPWriteTimeout.Duration(),
		"nodeLocal.resolvConf": c.NodeLocal.ResolvConfPath(), "nodeLocal.interfaceName": c.NodeLocal.InterfaceName,
		"nodeLocal.lockFile": c.NodeLocal.LockFile, "nodeLocal.setupInterface": c.NodeLocal.SetupInterface,
		"nodeLocal.setupNotrack": c.NodeLocal.SetupNotrack, "nodeLocal.skipTeardown": c.NodeLocal.SkipTeardown,
	}
	want := map[string]any{
		"mode": "cluster", "clusterDomain": "cluster.local", "ClusterZone": "cluster.local.", "logLevel": "info", "logFormat": "text",
		"pods": "disabled", "RecordTTL": uint32(5), "autopath": true, "autopathOptionCode": 65001,
		"TopNamespaces": 20, "coreDNSMetrics": false,
		"maxConcurrent": 1000, "shedRcode": "SERVFAIL", "ShedRcodeValue": 2,
		"cache.successBytes": int64(32 << 20), "cache.denialBytes": int64(8 << 20),
		"cache.zoneBytes": int64(16 << 20),
		"cache.maxTTL":    30 * time.Second, "cache.minTTL": time.Duration(0),
		"cache.maxNegativeTTL": 5 * time.Second, "cache.minNegativeTTL": time.Duration(0),
		"cache.serveStale": time.Duration(0), "cache.staleTTL": 30 * time.Second,
		"cache.prefetch.amount": 0, "cache.prefetch.window": time.Minute, "cache.prefetch.percentage": 10,
		"loadbalance": true, "hosts.ttl": time.Hour, "hosts.reload": 5 * time.Second,
		"udpAnswerLimit": 0,
		"lameduck":       5 * time.Second, "udpSockets": 0, "limits.udpInFlight": 2000, "limits.tcpConnections": 1000,
		"limits.tcpConnectionsPerClient": 250,
		"limits.tcpIdleTimeout":          10 * time.Second, "limits.tcpWriteTimeout": 5 * time.Second,
		"nodeLocal.resolvConf": "/etc/resolv.conf", "nodeLocal.interfaceName": "nodelocaldns",
		"nodeLocal.lockFile": "/run/dnsconfigurer/node-local.lock", "nodeLocal.setupInterface": false,
		"nodeLocal.setupNotrack": false, "nodeLocal.skipTeardown": false,
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("default %s = %v (%T), want %v (%T)", k, got[k], got[k], w, w)
		}
	}

	t.Run("node-local", func(t *testing.T) {
		c := ServerConfiguration{Mode: ModeNodeLocal}
		c.SetDefaults()
		if c.NodeLocal.External != "cluster" || c.NodeLocal.ExternalMode() != "cluster" || c.NodeLocal.ClusterConfig != "" {
			t.Errorf("node-local defaults: external %q, clusterConfig %q", c.NodeLocal.External, c.NodeLocal.ClusterConfig)
		}
		var cl ServerConfiguration
		cl.SetDefaults()
		if cl.NodeLocal.External != "" || cl.NodeLocal.ExternalMode() != "cluster" {
			t.Errorf("mode cluster: external %q set", cl.NodeLocal.External)
		}
	})
	t.Run("route", func(t *testing.T) {
		c := ServerConfiguration{Forward: []ForwardRoute{{Zone: ".", Upstreams: []string{"/etc/resolv.conf"}}}}
		c.SetDefaults()
		r := c.Forward[0]
		if r.Policy != "random" || r.MaxFailsValue() != 2 || r.HealthCheck.Duration() != 500*time.Millisecond ||
			r.Timeout.Duration() != 2*time.Second || r.Expire.Duration() != 10*time.Second {
			t.Errorf("route defaults = %+v", r)
		}
	})
	// Issue 27 item 3: node-local waits for the cluster DNS longer than the
	// cluster DNS waits for its upstreams, so a silent name is the cluster
	// DNS's SERVFAIL, never a timeout that counts against the cluster DNS.
	t.Run("node-local cluster timeout above the forward timeout", func(t *testing.T) {
		c := ServerConfiguration{Mode: ModeNodeLocal, Forward: []ForwardRoute{{Zone: ".", Upstreams: []string{"10.0.0.53"}}}}
		c.SetDefaults()
		nl, fwd := c.NodeLocal.ClusterTimeout.Duration(), c.Forward[0].Timeout.Duration()
		if !(fwd < AutopathDeadline && AutopathDeadline < nl && nl <= 5*time.Second) {
			t.Errorf("forward timeout %v, autopath deadline %v, nodeLocal.clusterTimeout %v: want them rising, and at most glibc's 5s",
				fwd, AutopathDeadline, nl)
		}
		for _, tt := range []struct {
			timeout Duration
			want    string // "" for valid
		}{
			{"soon", "not a duration"},
			{"1s", "must be above 2.5s"},
			{"2500ms", "must be above 2.5s"},
			{"2600ms", ""},
			{"1m", ""},
		} {
			c.NodeLocal.ClusterTimeout = tt.timeout
			var e fieldErrors
			c.NodeLocal.validate(&e, ModeNodeLocal)
			err := e.join()
			if (tt.want == "" && err != nil) || (tt.want != "" && (err == nil || !strings.Contains(err.Error(), "nodeLocal.clusterTimeout") || !strings.Contains(err.Error(), tt.want))) {
				t.Errorf("clusterTimeout %q: %v, want %q", tt.timeout, err, tt.want)
			}
		}
	})
	t.Run("explicit zeros stay", func(t *testing.T) {
		zero, off := 0, false
		c := ServerConfiguration{TTL: &zero, Autopath: &off, Loadbalance: &off, NodeLocal: NodeLocal{ResolvConf: new(string)},
			Forward: []ForwardRoute{{Zone: ".", Upstreams: []string{"10.0.0.53"}, MaxFails: &zero}}, NamespaceMetrics: &zero}
		c.SetDefaults()
		if c.RecordTTL() != 0 || c.AutopathEnabled() || c.LoadbalanceEnabled() || c.NodeLocal.ResolvConfPath() != "" ||
			c.Forward[0].MaxFailsValue() != 0 || c.TopNamespaces() != 0 {
			t.Errorf("explicit zero values were replaced by defaults: %+v", c)
		}
	})
	t.Run("override ttl from hosts", func(t *testing.T) {
		c := ServerConfiguration{Hosts: HostsFile{TTL: "1m"}, Overrides: []Override{{Name: "a.example", Addresses: []string{"192.0.2.1"}}}}
		c.SetDefaults()
		if c.Overrides[0].TTL != "1m" {
			t.Errorf("override ttl = %q, want hosts.ttl 1m", c.Overrides[0].TTL)
		}
	})
	t.Run("autopathBySource implies pods verified", func(t *testing.T) {
		c := ServerConfiguration{AutopathBySource: true}
		c.SetDefaults()
		if c.Pods != "verified" {
			t.Errorf("pods = %q, want verified", c.Pods)
		}
	})
}

// validServer is a valid cluster config with two routes, before defaults.
func validServer() *ServerConfiguration {
	return &ServerConfiguration{
		Listen: []string{"127.0.0.1:53"},
		Forward: []ForwardRoute{
			{Zone: ".", Upstreams: []string{"/etc/resolv.conf"}},
			{Zone: "corp.example", Upstreams: []string{"10.0.0.53", "[fd00::53]:5353"}},
		},
	}
}

func TestServerValidate(t *testing.T) {
	checkMutations(t, []mutation{
		{"valid", func(*ServerConfiguration) {}, nil},
		{"mode", func(c *ServerConfiguration) { c.Mode = "edge" }, []string{`mode: "edge": must be "cluster" or "node-local"`}},
		{"listen", func(c *ServerConfiguration) { c.Listen = []string{"127.0.0.1"} },
			[]string{`listen[0]: "127.0.0.1": not an address such as "0.0.0.0:53", "[::]:53" or ":53"`}},
		{"listen host", func(c *ServerConfiguration) { c.Listen = []string{"dns.example:53"} },
			[]string{`listen[0]: "dns.example:53": "dns.example" is not an IP address`}},
		{"listen port", func(c *ServerConfiguration) { c.Listen = []string{":65536"} }, []string{`listen[0]: ":65536": invalid port`}},
		{"listen twice", func(c *ServerConfiguration) { c.Listen = []string{":53", "127.0.0.1:0", ":53"} },
			[]string{`listen[2]: ":53": the same as listen[0]`}},
		{"listen both wildcards", func(c *ServerConfiguration) { c.Listen = []string{"0.0.0.0:53", "[::]:53"} }, nil},
		{"listen wildcard and a specific address", func(c *ServerConfiguration) {
			c.Listen = []string{"[::]:53", "0.0.0.0:54", "[fd00::10]:54", "127.0.0.1:53"}
		},
			[]string{`listen[2]: "[fd00::10]:54": binds the same port as listen[1] "0.0.0.0:54", and a wildcard address takes every address of its family: set reusePort (--reuse-port), or listen on specific addresses only`,
				`listen[3]: "127.0.0.1:53": binds the same port as listen[0] "[::]:53", and a wildcard address takes every address of its family: set reusePort (--reuse-port), or listen on specific addresses only`}},
		{"listen split wildcards and specific addresses", func(c *ServerConfiguration) {
			c.Listen = []string{"0.0.0.0:53", "[::]:53", "[fd00::10]:53"}
		}, []string{`listen[2]: "[fd00::10]:53": binds the same port as listen[1] "[::]:53", and a wildcard address takes every address of its family: set reusePort (--reuse-port), or listen on specific addresses only`}},
		{"listen wildcard and specific addresses with reusePort", func(c *ServerConfiguration) {
			c.Listen, c.ReusePort = []string{"0.0.0.0:53", "[::]:53", "[fd00::10]:53", "127.0.0.1:53"}, true
		}, nil},
		{"listen wildcard and node-local addresses", func(c *ServerConfiguration) {
			c.Mode, c.Forward, c.Listen = ModeNodeLocal, nil, []string{":53"}
			c.NodeLocal = NodeLocal{ClusterUpstream: []string{"fd00:10:96::b"}, LocalIPs: []string{"fd00::10"}}
		}, []string{`nodeLocal.localIPs: "[fd00::10]:53": binds the same port as listen[0] ":53", and a wildcard address takes every address of its family: set reusePort (--reuse-port), or listen on specific addresses only`}},
		{"listen specific addresses of both families", func(c *ServerConfiguration) { c.Listen = []string{"127.0.0.1:53", "[::1]:53", "[fd00::10]:53"} }, nil},
		{"cluster domain", func(c *ServerConfiguration) { c.ClusterDomain = "cluster..local" },
			[]string{`clusterDomain: "cluster..local" is not a domain such as "cluster.local": has an empty label`}},
		{"cluster domain root", func(c *ServerConfiguration) { c.ClusterDomain = "." },
			[]string{`clusterDomain: "." is not a domain such as "cluster.local": the root has no cluster names`}},
		{"metrics", func(c *ServerConfiguration) { c.MetricsListen = "9153" },
			[]string{`metricsListen: "9153": not an address such as "0.0.0.0:53", "[::]:53" or ":53"`}},
		{"log level", func(c *ServerConfiguration) { c.LogLevel = "trace" }, []string{`logLevel: "trace": must be debug, info, warn or error`}},
		{"log format", func(c *ServerConfiguration) { c.LogFormat = "logfmt" }, []string{`logFormat: "logfmt": must be text or json`}},
		{"two sources", func(c *ServerConfiguration) { c.Objects, c.Kubeconfig = "/objects", "/kubeconfig" },
			[]string{`objects: excludes kubeconfig: give one record source`}},
		{"namespace", func(c *ServerConfiguration) { c.Namespaces = []string{"default", "Kube_System"} },
			[]string{`namespaces[1]: "Kube_System": not a namespace name (a DNS label)`}},
		{"pods", func(c *ServerConfiguration) { c.Pods = "all" }, []string{`pods: "all": must be "verified", "insecure" or "disabled"`}},
		{"pods for autopathBySource", func(c *ServerConfiguration) { c.AutopathBySource, c.Pods = true, "insecure" },
			[]string{`pods: "insecure": autopathBySource needs "verified"`}},
		{"autopathBySource without autopath", func(c *ServerConfiguration) { c.AutopathBySource, c.Autopath = true, new(bool) },
			[]string{`autopathBySource: needs autopath: true`}},
		{"ttl", func(c *ServerConfiguration) { c.TTL = ptr(3601) }, []string{`ttl: 3601: must be between 0 and 3600`}},
		{"ttl negative", func(c *ServerConfiguration) { c.TTL = ptr(-1) }, []string{`ttl: -1: must be between 0 and 3600`}},
		{"option code", func(c *ServerConfiguration) { c.AutopathOptionCode = 10 },
			[]string{`autopathOptionCode: 10: not a local option code (65001-65534)`}},
		{"namespace metrics", func(c *ServerConfiguration) { c.NamespaceMetrics = ptr(1001) },
			[]string{`namespaceMetrics: 1001: must be between 0 and 1000`}},
		{"namespace metrics negative", func(c *ServerConfiguration) { c.NamespaceMetrics = ptr(-1) },
			[]string{`namespaceMetrics: -1: must be between 0 and 1000`}},
		{"zone", func(c *ServerConfiguration) { c.Forward[1].Zone = "corp example" },
			[]string{`forward[1].zone: "corp example": has the character ' '`}},
		{"zone empty", func(c *ServerConfiguration) { c.Forward[1].Zone = "" }, []string{`forward[1].zone: "": empty`}},
		{"zone the cluster domain", func(c *ServerConfiguration) { c.Forward[1].Zone = "Cluster.Local." },
			[]string{`forward[1].zone: "Cluster.Local.": the cluster domain itself, whose names come from the cluster; forward a zone inside it instead`}},
		{"zone inside the cluster domain", func(c *ServerConfiguration) { c.Forward[1].Zone = "paris.svc.cluster.local" }, nil},
		{"zone twice case and dot", func(c *ServerConfiguration) {
			c.Forward = append(c.Forward, ForwardRoute{Zone: "CORP.example.", Upstreams: []string{"10.0.0.54"}})
		}, []string{`forward[2].zone: "CORP.example.": forward[1] already routes zone "corp.example."`}},
		{"default route twice", func(c *ServerConfiguration) {
			c.Forward = append(c.Forward, ForwardRoute{Zone: ".", Upstreams: []string{"10.0.0.54"}})
		}, []string{`forward[2].zone: ".": forward[0] already routes zone "."`}},
		{"except outside", func(c *ServerConfiguration) { c.Forward[1].Except = []string{"a.corp.example", "other.example"} },
			[]string{`forward[1].except[1]: "other.example": not inside zone "corp.example"`}},
		{"except zone", func(c *ServerConfiguration) { c.Forward[1].Except = []string{"corp.EXAMPLE."} },
			[]string{`forward[1].except[0]: "corp.EXAMPLE.": the zone itself; remove the route instead`}},
		{"except name", func(c *ServerConfiguration) { c.Forward[0].Except = []string{"a/b"} },
			[]string{`forward[0].except[0]: "a/b": has the character '/'`}},
		{"no upstreams", func(c *ServerConfiguration) { c.Forward[1].Upstreams = nil },
			[]string{`forward[1].upstreams: required: at least one address, or the path of a resolv.conf`}},
		{"upstream port", func(c *ServerConfiguration) { c.Forward[1].Upstreams = []string{"10.0.0.1:99999"} },
			[]string{`forward[1].upstreams[0]: "10.0.0.1:99999": invalid port`}},
		{"upstream port 0", func(c *ServerConfiguration) { c.Forward[1].Upstreams = []string{"10.0.0.1:0"} },
			[]string{`forward[1].upstreams[0]: "10.0.0.1:0": invalid port`}},
		{"upstream name", func(c *ServerConfiguration) { c.Forward[1].Upstreams = []string{"dns.example:53"} },
			[]string{`forward[1].upstreams[0]: "dns.example:53": "dns.example" is not an IP address`}},
		{"upstream ipv6 without brackets", func(c *ServerConfiguration) { c.Forward[1].Upstreams = []string{"fd00::53:5353", "fd00::53]:53"} },
			[]string{`forward[1].upstreams[1]: "fd00::53]:53": not an address such as "10.0.0.53", "10.0.0.53:53" or "[fd00::53]:53"`}},
		{"upstream twice", func(c *ServerConfiguration) { c.Forward[1].Upstreams = []string{"10.0.0.53", "10.0.0.53:53"} },
			[]string{`forward[1].upstreams[1]: "10.0.0.53:53": the same upstream as upstreams[0]`}},
		{"resolv.conf with addresses", func(c *ServerConfiguration) { c.Forward[0].Upstreams = []string{"10.0.0.53", "/etc/resolv.conf"} }, nil},
		{"relative resolv.conf", func(c *ServerConfiguration) { c.Forward[0].Upstreams = []string{"resolv.conf"} },
			[]string{`forward[0].upstreams[0]: "resolv.conf": not an address such as "10.0.0.53", "10.0.0.53:53" or "[fd00::53]:53"`}},
		{"route cache", func(c *ServerConfiguration) {
			c.Forward[1].Cache = &RouteCache{CacheTTLs: CacheTTLs{MaxTTL: "3600s"}, Prefetch: &Prefetch{Amount: 2}}
		}, nil},
		{"route cache off", func(c *ServerConfiguration) { c.Forward[1].Cache = &RouteCache{Disabled: true} }, nil},
		{"route cache bounds", func(c *ServerConfiguration) { c.Forward[1].Cache = &RouteCache{CacheTTLs: CacheTTLs{MinTTL: "2h"}} },
			[]string{`forward[1].cache.minTTL: "2h": over maxTTL "30s"`}},
		{"route cache for the root", func(c *ServerConfiguration) { c.Forward[0].Cache = &RouteCache{CacheTTLs: CacheTTLs{MaxTTL: "60s"}} },
			[]string{`forward[0].cache: not for zone ".": its answers follow cache:`}},
		{"policy", func(c *ServerConfiguration) { c.Forward[1].Policy = "round-robin" },
			[]string{`forward[1].policy: "round-robin": must be "random", "round_robin" or "sequential"`}},
		{"max fails", func(c *ServerConfiguration) { c.Forward[1].MaxFails = ptr(-1) }, []string{`forward[1].maxFails: -1: must be >= 0`}},
		{"health check", func(c *ServerConfiguration) { c.Forward[1].HealthCheck = "often" },
			[]string{`forward[1].healthCheck: "often": not a duration such as "5s" or "500ms"`}},
		{"timeout", func(c *ServerConfiguration) { c.Forward[1].Timeout = "0s" },
			[]string{`forward[1].timeout: "0s": must be between 1ms and 1m0s`}},
		{"expire", func(c *ServerConfiguration) { c.Forward[1].Expire = "-1s" },
			[]string{`forward[1].expire: "-1s": must be between 1ms and 1h0m0s`}},
		{"tcp and udp", func(c *ServerConfiguration) { c.Forward[1].ForceTCP, c.Forward[1].PreferUDP = true, true },
			[]string{`forward[1].forceTCP: excludes preferUDP`}},
		{"max concurrent", func(c *ServerConfiguration) { c.MaxConcurrent = -1 }, []string{`maxConcurrent: -1: must be > 0`}},
		{"max concurrent per domain negative", func(c *ServerConfiguration) { c.MaxConcurrentPerDomain = -1 },
			[]string{`maxConcurrentPerDomain: -1: must be >= 0 (deprecated, no effect: maxConcurrent is shared per client)`}},
		{"failfast without health checks", func(c *ServerConfiguration) {
			c.FailFastAllUnhealthy, c.Forward = true, []ForwardRoute{{Zone: ".", Upstreams: []string{"10.0.0.53"}, MaxFails: ptr(0)}}
		}, []string{`forward[0].maxFails: 0 (no health checks) does not go with failFastAllUnhealthy, which needs them`}},
		{"failfast", func(c *ServerConfiguration) { c.FailFastAllUnhealthy = true }, nil},
		{"shed rcode", func(c *ServerConfiguration) { c.ShedRcode = "servfail" },
			[]string{`shedRcode: "servfail": must be "SERVFAIL" or "REFUSED"`}},
		{"success bytes zero", func(c *ServerConfiguration) { c.Cache.SuccessBytes = "0" }, []string{`cache.successBytes: "0": must be > 0`}},
		{"success bytes negative", func(c *ServerConfiguration) { c.Cache.SuccessBytes = "-1Mi" }, []string{`cache.successBytes: "-1Mi": must be > 0`}},
		{"denial bytes", func(c *ServerConfiguration) { c.Cache.DenialBytes = "8MB" },
			[]string{`cache.denialBytes: "8MB": not a size such as 33554432 or "32Mi"`}},
		{"denial bytes fraction", func(c *ServerConfiguration) { c.Cache.DenialBytes = "1.5" },
			[]string{`cache.denialBytes: "1.5": not a whole number of bytes`}},
		{"zone bytes small", func(c *ServerConfiguration) { c.Cache.ZoneBytes = "64Ki" }, []string{`cache.zoneBytes: "64Ki": must be at least 1Mi`}},
		{"zone bytes zero", func(c *ServerConfiguration) { c.Cache.ZoneBytes = "0" }, []string{`cache.zoneBytes: "0": must be > 0`}},
		{"max ttl", func(c *ServerConfiguration) { c.Cache.MaxTTL = "500ms" }, []string{`cache.maxTTL: "500ms": must be between 1s and 596523h14m7s`}},
		{"min ttl over max", func(c *ServerConfiguration) { c.Cache.MinTTL, c.Cache.MaxTTL = "2m", "1m" },
			[]string{`cache.minTTL: "2m": over maxTTL "1m"`}},
		{"min ttl", func(c *ServerConfiguration) { c.Cache.MinTTL = "x" }, []string{`cache.minTTL: "x": not a duration such as "5s" or "500ms"`}},
		{"max negative ttl", func(c *ServerConfiguration) { c.Cache.MaxNegativeTTL = "0s" },
			[]string{`cache.maxNegativeTTL: "0s": must be between 1s and 596523h14m7s`}},
		{"min negative over max", func(c *ServerConfiguration) { c.Cache.MinNegativeTTL, c.Cache.MaxNegativeTTL = "1h", "30m" },
			[]string{`cache.minNegativeTTL: "1h": over maxNegativeTTL "30m"`}},
		{"serve stale", func(c *ServerConfiguration) { c.Cache.ServeStale = "-1s" }, []string{`cache.serveStale: "-1s": must be between 0s and 168h0m0s`}},
		{"stale ttl", func(c *ServerConfiguration) { c.Cache.StaleTTL = "0s" }, []string{`cache.staleTTL: "0s": must be between 1s and 596523h14m7s`}},
		{"prefetch amount", func(c *ServerConfiguration) { c.Cache.Prefetch.Amount = -2 }, []string{`cache.prefetch.amount: -2: must be >= 0`}},
		{"prefetch window", func(c *ServerConfiguration) { c.Cache.Prefetch.Window = "1ms" },
			[]string{`cache.prefetch.window: "1ms": must be between 1s and 24h0m0s`}},
		{"prefetch percentage", func(c *ServerConfiguration) { c.Cache.Prefetch.Percentage = 95 },
			[]string{`cache.prefetch.percentage: 95: must be between 10 and 90`}},
		{"hosts ttl", func(c *ServerConfiguration) { c.Hosts.TTL = "1d" }, []string{`hosts.ttl: "1d": not a duration such as "5s" or "500ms"`}},
		{"hosts reload", func(c *ServerConfiguration) { c.Hosts.Reload = "2h" }, []string{`hosts.reload: "2h": must be between 0s and 1h0m0s`}},
		{"override name", func(c *ServerConfiguration) {
			c.Overrides = []Override{{Name: "a..example", Addresses: []string{"192.0.2.1"}}}
		}, []string{`overrides[0].name: "a..example": has an empty label`}},
		{"override root", func(c *ServerConfiguration) { c.Overrides = []Override{{Name: ".", Addresses: []string{"192.0.2.1"}}} },
			[]string{`overrides[0].name: ".": the root is not a host name`}},
		{"override in cluster", func(c *ServerConfiguration) {
			c.Overrides = []Override{{Name: "web.default.svc.Cluster.Local", Addresses: []string{"192.0.2.1"}}}
		}, []string{`overrides[0].name: "web.default.svc.Cluster.Local": inside the cluster domain "cluster.local", whose names come from the cluster only`}},
		{"override twice", func(c *ServerConfiguration) {
			c.Overrides = []Override{{Name: "a.example", Addresses: []string{"192.0.2.1"}}, {Name: "A.example.", Addresses: []string{"192.0.2.2"}}}
		}, []string{`overrides[1].name: "A.example.": already overridden by overrides[0]`}},
		{"override addresses", func(c *ServerConfiguration) {
			c.Overrides = []Override{{Name: "a.example"}, {Name: "b.example", Addresses: []string{"2001:db8::1", "host"}}}
		}, []string{`overrides[0].addresses: required: at least one IP address`, `overrides[1].addresses[1]: "host": not an IP address`}},
		{"override ttl", func(c *ServerConfiguration) {
			c.Overrides = []Override{{Name: "a.example", Addresses: []string{"192.0.2.1"}, TTL: "-1s"}}
		}, []string{`overrides[0].ttl: "-1s": must be between 0s and 596523h14m7s`}},
		{"reverse zone", func(c *ServerConfiguration) { c.ReverseZones = []string{"10.96.0.0"} },
			[]string{`reverseZones[0]: "10.96.0.0": not a CIDR such as "10.96.0.0/12"`}},
		{"reverse zone mapped", func(c *ServerConfiguration) { c.ReverseZones = []string{"::ffff:10.96.0.0/108"} },
			[]string{`reverseZones[0]: "::ffff:10.96.0.0/108": IPv4-mapped; use the IPv4 form`}},
		{"reverse zone twice", func(c *ServerConfiguration) { c.ReverseZones = []string{"10.96.0.0/12", "10.100.0.1/12"} },
			[]string{`reverseZones[1]: "10.100.0.1/12": the same network as reverseZones[0]`}},
		{"reverse scope", func(c *ServerConfiguration) { c.ReverseScope = []string{"10.0.0.0/24", "fd00::"} },
			[]string{`reverseScope[1]: "fd00::": not a CIDR such as "10.96.0.0/12"`}},
		{"reverse zone inside the scope", func(c *ServerConfiguration) {
			c.ReverseScope, c.ReverseZones = []string{"10.0.0.0/16", "fd00::/64"}, []string{"10.0.1.0/24", "fd00::/96"}
		}, nil},
		{"clusterset zone", func(c *ServerConfiguration) { c.ClustersetZone = "ClusterSet.Local." }, nil},
		{"clusterset zone, the cluster domain's", func(c *ServerConfiguration) { c.ClustersetZone = "cluster.local" },
			[]string{`clustersetZone: "cluster.local": overlaps clusterDomain "cluster.local"; give a zone of its own such as "clusterset.local"`}},
		{"clusterset zone inside the cluster domain", func(c *ServerConfiguration) { c.ClustersetZone = "set.cluster.local" },
			[]string{`clustersetZone: "set.cluster.local": overlaps clusterDomain "cluster.local"; give a zone of its own such as "clusterset.local"`}},
		{"clusterset zone with objects", func(c *ServerConfiguration) { c.ClustersetZone, c.Objects = "clusterset.local", "/objects" },
			[]string{`clustersetZone: not used with objects: the ServiceImports are read from an API server (kubeconfig)`}},
		{"clusterset zone, no cluster", func(c *ServerConfiguration) { c.ClustersetZone, c.NoClusterZone = "clusterset.local", true },
			[]string{`clustersetZone: not used with noClusterZone: there are no cluster records`}},
		{"clusterset zone, not a domain", func(c *ServerConfiguration) { c.ClustersetZone = "a..b" },
			[]string{`clustersetZone: "a..b" is not a domain such as "cluster.local": has an empty label`}},
		{"no cluster zone with a kubeconfig", func(c *ServerConfiguration) { c.NoClusterZone, c.Kubeconfig = true, "/k" },
			[]string{`kubeconfig: not used with noClusterZone: there are no cluster records`}},
		{"reverse zone outside the scope", func(c *ServerConfiguration) {
			c.ReverseScope, c.ReverseZones = []string{"10.0.0.0/24"}, []string{"10.0.0.0/16", "10.0.1.0/24", "fd00::/64"}
		}, []string{`reverseZones[0]: "10.0.0.0/16": outside reverseScope, whose reverse names are forwarded`,
			`reverseZones[1]: "10.0.1.0/24": outside reverseScope, whose reverse names are forwarded`,
			`reverseZones[2]: "fd00::/64": outside reverseScope, whose reverse names are forwarded`}},
		{"lameduck", func(c *ServerConfiguration) { c.Lameduck = "2m" }, []string{`lameduck: "2m": must be between 0s and 1m0s`}},
		{"udp in flight", func(c *ServerConfiguration) { c.Limits.UDPInFlight = -1 }, []string{`limits.udpInFlight: -1: must be > 0`}},
		{"udp in flight under max concurrent", func(c *ServerConfiguration) { c.Limits.UDPInFlight = 1000 },
			[]string{`limits.udpInFlight: 1000: must be over maxConcurrent (1000), or queries waiting on upstreams can hold every slot and in-cluster names go unanswered`}},
		{"udp in flight without forwarding", func(c *ServerConfiguration) { c.Limits.UDPInFlight, c.Forward = 10, nil }, nil},
		{"tcp connections", func(c *ServerConfiguration) { c.Limits.TCPConnections = -5 }, []string{`limits.tcpConnections: -5: must be > 0`}},
		{"tcp connections per client over the total", func(c *ServerConfiguration) { c.Limits.TCPConnections, c.Limits.TCPConnectionsPerClient = 100, 101 },
			[]string{`limits.tcpConnectionsPerClient: 101: must be between 1 and tcpConnections (100)`}},
		{"tcp connections per client negative", func(c *ServerConfiguration) { c.Limits.TCPConnectionsPerClient = -1 },
			[]string{`limits.tcpConnectionsPerClient: -1: must be between 1 and tcpConnections (1000)`}},
		{"tcp idle", func(c *ServerConfiguration) { c.Limits.TCPIdleTimeout = "0s" },
			[]string{`limits.tcpIdleTimeout: "0s": must be between 1ms and 1h0m0s`}},
		{"tcp write", func(c *ServerConfiguration) { c.Limits.TCPWriteTimeout = "5" },
			[]string{`limits.tcpWriteTimeout: "5": not a duration such as "5s" or "500ms"`}},
		{"cluster upstream in cluster mode", func(c *ServerConfiguration) { c.NodeLocal.ClusterUpstream = []string{"10.96.0.10"} },
			[]string{`nodeLocal.clusterUpstream: only used in mode "node-local"`}},
		{"node-local", func(c *ServerConfiguration) {
			c.Mode, c.Forward, c.NodeLocal.ClusterUpstream = "node-local", nil, []string{"10.96.0.10", "[fd00::10]:53"}
		}, nil},
		{"node-local with cluster fields", func(c *ServerConfiguration) {
			c.Mode, c.Objects, c.NodeLocal.ClusterUpstream = "node-local", "/objects", []string{"10.96.0.10:53"}
		}, []string{`objects: not used in mode "node-local", which has no records`,
			`forward: not used in mode "node-local", which forwards to nodeLocal.clusterUpstream: put stub domains in the cluster DNS's configuration and point nodeLocal.clusterConfig at that file`}},
		// Node-local reads its node's topology zone through it.
		{"node-local kubeconfig", func(c *ServerConfiguration) { c.Mode, c.Forward, c.Kubeconfig = "node-local", nil, "/kc" }, nil},
		{"node-local upstream", func(c *ServerConfiguration) {
			c.Mode, c.Forward, c.NodeLocal.ClusterUpstream = "node-local", nil, []string{"10.96.0.10:53000000"}
		}, []string{`nodeLocal.clusterUpstream[0]: "10.96.0.10:53000000": invalid port`}},
		{"node-local upstream not expanded by kubelet", func(c *ServerConfiguration) {
			c.Mode, c.Forward, c.NodeLocal.ClusterUpstream = "node-local", nil, []string{"$(DNSCONFIGURER_DNS_UPSTREAM_SERVICE_HOST)"}
		}, []string{`nodeLocal.clusterUpstream[0]: "$(DNSCONFIGURER_DNS_UPSTREAM_SERVICE_HOST)": an unexpanded variable: kubelet sets DNSCONFIGURER_DNS_UPSTREAM_SERVICE_HOST only when the Service exists before the pod starts (create it, then delete the pod)`}},
		{"node-local transparent", func(c *ServerConfiguration) {
			c.Mode, c.Forward, c.NodeLocal.ClusterUpstream = "node-local", nil, []string{"10.96.0.11"}
			c.NodeLocal.LocalIPs, c.NodeLocal.SetupInterface, c.NodeLocal.SetupNotrack = []string{"169.254.20.10", "10.96.0.10", "fd00::a"}, true, true
		}, nil},
		{"node-local local IPs", func(c *ServerConfiguration) {
			c.Mode, c.Forward, c.NodeLocal.ClusterUpstream = "node-local", nil, []string{"10.96.0.11"}
			c.NodeLocal.LocalIPs = []string{"169.254.20.10", "127.0.0.1", "x", "169.254.20.10", "fe80::1%eth0", "fe80::10"}
			c.NodeLocal.InterfaceName, c.NodeLocal.LockFile, c.NodeLocal.SetupNotrack = "a/b", "run/x.lock", true
		}, []string{`nodeLocal.localIPs[1]: "127.0.0.1": a loopback, unspecified or multicast address cannot be a node-local address`,
			`nodeLocal.localIPs[2]: "x": not an IP address`, `nodeLocal.localIPs[3]: "169.254.20.10": also nodeLocal.localIPs[0]`,
			`nodeLocal.localIPs[4]: "fe80::1%eth0": no zone allowed`,
			`nodeLocal.localIPs[5]: "fe80::10": an IPv6 link-local address is reachable from a pod only with a zone of its own; use a unique local address (fd00::/8) such as fd00::10`,
			`nodeLocal.interfaceName: "a/b": not a Linux interface name (at most 15 characters, no '/', ':' or space)`,
			`nodeLocal.lockFile: "run/x.lock": must be an absolute path`}},
		{"setup without local IPs", func(c *ServerConfiguration) {
			c.Mode, c.Forward, c.NodeLocal.ClusterUpstream, c.NodeLocal.SetupInterface = "node-local", nil, []string{"10.96.0.11"}, true
		}, []string{`nodeLocal.localIPs: required by setupInterface and setupNotrack`}},
		{"node-local external direct", func(c *ServerConfiguration) {
			c.Mode, c.Forward, c.NodeLocal.ClusterUpstream = "node-local", nil, []string{"10.96.0.11"}
			c.NodeLocal.External, c.NodeLocal.ClusterConfig = "direct", "/etc/dnsconfigurer/cluster/config.yaml"
		}, nil},
		{"node-local external", func(c *ServerConfiguration) {
			c.Mode, c.Forward, c.NodeLocal.ClusterUpstream = "node-local", nil, []string{"10.96.0.11"}
			c.NodeLocal.External, c.NodeLocal.ClusterConfig = "Direct", "cluster/config.yaml"
		}, []string{`nodeLocal.clusterConfig: "cluster/config.yaml": must be an absolute path`,
			`nodeLocal.external: "Direct": must be "cluster" or "direct"`}},
		{"node-local direct without resolv.conf", func(c *ServerConfiguration) {
			c.Mode, c.Forward, c.NodeLocal.ClusterUpstream = "node-local", nil, []string{"10.96.0.11"}
			c.NodeLocal.External, c.NodeLocal.ResolvConf = "direct", new(string)
		}, []string{`nodeLocal.external: "direct" needs nodeLocal.resolvConf, the node's nameservers`}},
		{"node-local fields in cluster mode", func(c *ServerConfiguration) {
			c.NodeLocal.External, c.NodeLocal.ClusterConfig = "cluster", "/etc/x.yaml"
		}, []string{`nodeLocal.clusterConfig: only used in mode "node-local"`, `nodeLocal.external: only used in mode "node-local"`}},
		{"node-local answers", func(c *ServerConfiguration) {
			c.Mode, c.Forward, c.NodeLocal.ClusterUpstream = "node-local", nil, []string{"10.96.0.11"}
			c.Hosts.File = "/etc/hosts"
			c.Overrides = []Override{{Name: "db.example", Addresses: []string{"10.0.0.1"}}}
			c.Rewrites = []Rewrite{{Match: "exact", From: "a.example", To: "b.example"}}
		}, []string{`rewrites: not used in mode "node-local": the cluster DNS rewrites (nodeLocal.clusterConfig)`,
			`hosts.file: not used in mode "node-local": put it in the cluster DNS's configuration and point nodeLocal.clusterConfig at that file: its names then go to the cluster DNS`,
			`overrides: not used in mode "node-local": put it in the cluster DNS's configuration and point nodeLocal.clusterConfig at that file: its names then go to the cluster DNS`}},
		{"local IPs in cluster mode", func(c *ServerConfiguration) { c.NodeLocal.LocalIPs = []string{"169.254.20.10"} },
			[]string{`nodeLocal: localIPs, setupInterface and setupNotrack are for mode "node-local"`}},
		{"every error reported", func(c *ServerConfiguration) { c.Mode, c.LogLevel, c.Lameduck = "x", "y", "z" },
			[]string{`mode: "x": must be "cluster" or "node-local"`, `logLevel: "y": must be debug, info, warn or error`,
				`lameduck: "z": not a duration such as "5s" or "500ms"`}},
	})
}

func TestServerCheckComplete(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*ServerConfiguration)
		want   string
	}{
		{"complete", func(*ServerConfiguration) {}, ""},
		{"no listen", func(c *ServerConfiguration) { c.Listen = nil }, `listen: required: at least one address such as "0.0.0.0:53" (or nodeLocal.localIPs)`},
		{"node-local without upstream", func(c *ServerConfiguration) { c.Mode, c.Forward = "node-local", nil },
			`nodeLocal.clusterUpstream: required in mode "node-local"`},
		{"coreDNSMetrics with metricsListen", func(c *ServerConfiguration) { c.CoreDNSMetrics, c.MetricsListen = true, "127.0.0.1:9153" }, ""},
		{"coreDNSMetrics without metricsListen", func(c *ServerConfiguration) { c.CoreDNSMetrics, c.MetricsListen = true, "" },
			`coreDNSMetrics: needs metricsListen: without it no /metrics is served`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validServer()
			tt.mutate(c)
			c.SetDefaults()
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			err := c.CheckComplete()
			if got := errString(err); got != tt.want {
				t.Errorf("CheckComplete = %q, want %q", got, tt.want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestServerDecode(t *testing.T) {
	const head = "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\n"
	tests := []struct {
		name    string
		yaml    string
		wantErr string // a substring; "" for success
		check   func(*testing.T, *ServerConfiguration)
	}{
		{"minimal", head + "listen: [\":53\"]\n", "", func(t *testing.T, c *ServerConfiguration) {
			if c.Mode != "cluster" || c.Cache.SuccessBytes.Bytes() != 32<<20 {
				t.Errorf("defaults not applied: %+v", c)
			}
		}},
		{"json", `{"apiVersion":"dnsconfigurer.io/v1alpha1","kind":"ServerConfiguration","maxConcurrent":50}`, "",
			func(t *testing.T, c *ServerConfiguration) {
				if c.MaxConcurrent != 50 {
					t.Errorf("maxConcurrent = %d", c.MaxConcurrent)
				}
			}},
		{"bytes as integer and quantity", head + "cache: {successBytes: 1048576, denialBytes: 64M}\n", "",
			func(t *testing.T, c *ServerConfiguration) {
				if c.Cache.SuccessBytes.Bytes() != 1<<20 || c.Cache.DenialBytes.Bytes() != 64e6 {
					t.Errorf("sizes = %d, %d", c.Cache.SuccessBytes.Bytes(), c.Cache.DenialBytes.Bytes())
				}
			}},
		{"bytes negative integer", head + "cache: {successBytes: -1}\n", `cache.successBytes: "-1": must be > 0`, nil},
		{"bytes of the wrong type", head + "cache: {successBytes: true}\n", `want an integer or a quantity such as "32Mi"`, nil},
		{"unknown field", head + "listen: [\":53\"]\nupstream: 1.1.1.1\n", `unknown field "upstream"`, nil},
		{"unknown nested field", head + "forward:\n- zone: .\n  upstreams: [1.1.1.1]\n  maxFail: 3\n", `unknown field "maxFail"`, nil},
		{"unknown cache field", head + "cache: {size: 10}\n", `unknown field "size"`, nil},
		{"wrong kind", "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ShimConfiguration\n",
			`kind: "ShimConfiguration", want "ServerConfiguration"`, nil},
		{"wrong apiVersion", "apiVersion: dnsconfigurer.io/v1\nkind: ServerConfiguration\n",
			`apiVersion: "dnsconfigurer.io/v1" is not supported, want "dnsconfigurer.io/v1alpha1"`, nil},
		{"no kind", "listen: [\":53\"]\n", `apiVersion: "" is not supported`, nil},
		{"duration as a number", head + "lameduck: 5\n", "lameduck", nil},
		{"invalid value", head + "forward:\n- zone: .\n  upstreams: [\"10.0.0.1:99999\"]\n",
			`forward[0].upstreams[0]: "10.0.0.1:99999": invalid port`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := decodeServer([]byte(tt.yaml))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("decode = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

// docExample is the example file in ServerConfiguration's doc comment.
func docExample(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile("server.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(src), "\n") {
		body, ok := strings.CutPrefix(line, "//\t")
		if body == "apiVersion: dnsconfigurer.io/v1alpha1" {
			in = true
		}
		if in && !ok {
			break
		}
		if in {
			out = append(out, body)
		}
	}
	if len(out) < 10 {
		t.Fatalf("no example found in server.go's doc comment")
	}
	return []byte(strings.Join(out, "\n") + "\n")
}

func TestServerExamples(t *testing.T) {
	golden, err := os.ReadFile("testdata/server-full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := docExample(t)
	if string(doc) != string(golden) {
		t.Errorf("testdata/server-full.yaml differs from the example in ServerConfiguration's doc comment:\n%s", doc)
	}
	c, err := decodeServer(golden)
	if err != nil {
		t.Fatalf("decode testdata/server-full.yaml: %v", err)
	}

	t.Run("every field set", func(t *testing.T) {
		// The example spells every field out: defaults add nothing.
		var bare ServerConfiguration
		if err := yaml.UnmarshalStrict(golden, &bare); err != nil {
			t.Fatal(err)
		}
		withDefaults := bare
		withDefaults.SetDefaults()
		if !reflect.DeepEqual(bare, withDefaults) {
			t.Errorf("the example leaves fields to the defaults:\n%+v\nwith defaults:\n%+v", bare, withDefaults)
		}
	})
	t.Run("round trip", func(t *testing.T) {
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeServer(out)
		if err != nil {
			t.Fatalf("decode of the marshalled example: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(c, back) {
			t.Errorf("round trip differs:\n%s", out)
		}
	})
	t.Run("accessors", func(t *testing.T) {
		def, stub := c.Forward[0], c.Forward[1]
		got := map[string]any{
			"forward[0].ZoneName": def.ZoneName(), "forward[0].ResolvConf": def.ResolvConf(),
			"forward[0].UpstreamAddrs": def.UpstreamAddrs(), "forward[0].ExceptNames": def.ExceptNames(),
			"forward[1].ZoneName": stub.ZoneName(), "forward[1].ResolvConf": stub.ResolvConf(),
			"forward[1].UpstreamAddrs": stub.UpstreamAddrs(), "forward[1].policy": stub.Policy,
			"forward[1].timeout": stub.Timeout.Duration(), "forward[1].healthCheck": stub.HealthCheck.Duration(),
			"ReverseZonePrefixes": c.ReverseZonePrefixes(), "overrides[0].IPs": c.Overrides[0].IPs(),
			"overrides[0].NameFQDN": c.Overrides[0].NameFQDN(), "overrides[0].ttl": c.Overrides[0].TTL.Duration(),
			"cache.serveStale": c.Cache.ServeStale.Duration(), "cache.prefetch.amount": c.Cache.Prefetch.Amount,
			"hosts.file": c.Hosts.File, "metricsListen": c.MetricsListen, "namespaces": c.Namespaces,
		}
		want := map[string]any{
			"forward[0].ZoneName": ".", "forward[0].ResolvConf": "/etc/resolv.conf",
			"forward[0].UpstreamAddrs": []netip.AddrPort(nil), "forward[0].ExceptNames": []string{"corp.example."},
			"forward[1].ZoneName": "corp.example.", "forward[1].ResolvConf": "",
			"forward[1].UpstreamAddrs": []netip.AddrPort{netip.MustParseAddrPort("10.0.0.53:53"),
				netip.MustParseAddrPort("10.0.1.53:5353"), netip.MustParseAddrPort("[fd00::53]:53")},
			"forward[1].policy": "round_robin", "forward[1].timeout": 2 * time.Second, "forward[1].healthCheck": 500 * time.Millisecond,
			"ReverseZonePrefixes": []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("10.244.0.0/16"),
				netip.MustParsePrefix("fd00:10:96::/108")},
			"overrides[0].IPs":      []netip.Addr{netip.MustParseAddr("192.168.49.1")},
			"overrides[0].NameFQDN": "host.minikube.internal.", "overrides[0].ttl": time.Minute,
			"cache.serveStale": time.Hour, "cache.prefetch.amount": 10,
			"hosts.file": "/etc/dnsconfigurer/hosts", "metricsListen": "127.0.0.1:9153", "namespaces": []string{"default", "kube-system"},
		}
		for k, w := range want {
			if !reflect.DeepEqual(got[k], w) {
				t.Errorf("%s = %v, want %v", k, got[k], w)
			}
		}
	})
}

func TestServerAccessors(t *testing.T) {
	c := ServerConfiguration{
		ShedRcode:    "REFUSED",
		ReverseZones: []string{"10.96.0.1/12"},
		Overrides:    []Override{{Name: "A.Example", Addresses: []string{"::ffff:192.0.2.1", "2001:db8::1"}}},
		NodeLocal:    NodeLocal{ClusterUpstream: []string{"10.96.0.10", "[fd00::10]:5353", "::ffff:10.96.0.11"}},
	}
	if got := c.ShedRcodeValue(); got != 5 {
		t.Errorf("ShedRcodeValue = %d, want 5 (REFUSED)", got)
	}
	if got := c.ReverseZonePrefixes(); !slices.Equal(got, []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}) {
		t.Errorf("ReverseZonePrefixes = %v, want the masked prefix", got)
	}
	if got := c.Overrides[0].IPs(); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}) {
		t.Errorf("IPs = %v, want IPv4-mapped unmapped", got)
	}
	if got := c.Overrides[0].NameFQDN(); got != "a.example." {
		t.Errorf("NameFQDN = %q", got)
	}
	want := []netip.AddrPort{netip.MustParseAddrPort("10.96.0.10:53"), netip.MustParseAddrPort("[fd00::10]:5353"),
		netip.MustParseAddrPort("10.96.0.11:53")}
	if got := c.NodeLocal.ClusterUpstreamAddrs(); !slices.Equal(got, want) {
		t.Errorf("ClusterUpstreamAddrs = %v, want %v", got, want)
	}
	for _, tt := range []struct {
		listen, localIPs []string
		want             string
	}{
		{[]string{"0.0.0.0:53", "[::]:53"}, nil, "dns://:53"}, // kubeadm's CoreDNS: ".:53" without bind
		{[]string{"[::]:5353"}, nil, "dns://:5353"},
		{[]string{":53"}, nil, "dns://:53"},
		{[]string{"10.96.0.10:53"}, nil, "dns://10.96.0.10:53"},
		{[]string{"[fd00::10]:53"}, nil, "dns://[fd00::10]:53"},
		{nil, []string{"169.254.20.10", "10.96.0.10"}, "dns://169.254.20.10:53"}, // node-cache's bind
		{nil, nil, "dns://:53"},
	} {
		c := ServerConfiguration{Listen: tt.listen, NodeLocal: NodeLocal{LocalIPs: tt.localIPs}}
		if got := c.CoreDNSServer(); got != tt.want {
			t.Errorf("CoreDNSServer of listen %v, localIPs %v = %q, want %q", tt.listen, tt.localIPs, got, tt.want)
		}
	}
	if got := Duration("bad").Duration(); got != 0 {
		t.Errorf("Duration of an invalid value = %v, want 0", got)
	}
	if got := ByteSize("bad").Bytes(); got != 0 {
		t.Errorf("Bytes of an invalid value = %d, want 0", got)
	}
}

// TestParseBytes checks the quantity parser against apimachinery's
// resource.ParseQuantity, which the --cache-size flag uses.
func TestParseBytes(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string
	}{
		{"1", ""}, {"33554432", ""}, {"32Mi", ""}, {"8Mi", ""}, {"1.5Gi", ""}, {"64M", ""}, {"2k", ""},
		{"1Ki", ""}, {"3Ti", ""}, {"2P", ""}, {"1Ei", ""}, {"0.5Ki", ""}, {"007", ""},
		{"", `not a size such as 33554432 or "32Mi"`},
		{"0", "must be > 0"},
		{"0Mi", "must be > 0"},
		{"-5", "must be > 0"},
		{"1.5", "not a whole number of bytes"},
		{"0.1k", ""},
		{"0.0001k", "not a whole number of bytes"},
		{"8MB", `not a size such as 33554432 or "32Mi"`},
		{"8 Mi", `not a size such as 33554432 or "32Mi"`},
		{"1e6", `not a size such as 33554432 or "32Mi"`},
		{"1..5Mi", `not a size such as 33554432 or "32Mi"`},
		{".5Mi", `not a size such as 33554432 or "32Mi"`},
		{"Mi", `not a size such as 33554432 or "32Mi"`},
		{"8Ei", "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseBytes(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("parseBytes(%q) = %d, %v, want error %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseBytes(%q): %v", tt.in, err)
			}
			q, err := resource.ParseQuantity(tt.in)
			if err != nil {
				t.Fatalf("resource.ParseQuantity(%q): %v", tt.in, err)
			}
			if got != q.Value() {
				t.Errorf("parseBytes(%q) = %d, resource.Quantity says %d", tt.in, got, q.Value())
			}
		})
	}
}

func TestBindFamily(t *testing.T) {
	for _, tt := range []struct {
		listen []string
		want   []string
	}{
		{[]string{"0.0.0.0:53"}, []string{""}}, // Go's dual-stack socket, as before
		{[]string{"[::]:53"}, []string{""}},
		{[]string{":53"}, []string{""}},
		{[]string{"0.0.0.0:53", "[::]:53"}, []string{"4", "6"}},
		{[]string{"[::]:53", "0.0.0.0:53", "[::1]:53"}, []string{"6", "4", ""}},
		{[]string{"0.0.0.0:53", "[::]:54"}, []string{"", ""}}, // other ports
		{[]string{":53", "0.0.0.0:53"}, []string{"", ""}},     // ":53" is both families: a conflict Validate reports
		{[]string{"127.0.0.1:53", "[fd00::10]:53"}, []string{"", ""}},
	} {
		var got []string
		for i := range tt.listen {
			got = append(got, BindFamily(tt.listen, i))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("BindFamily of %v = %q, want %q", tt.listen, got, tt.want)
		}
	}
}

// TestServerValidateCounts: udpAnswerLimit and udpSockets, each within
// its bounds or refused with them.
func TestServerValidateCounts(t *testing.T) {
	answer := func(c *ServerConfiguration, v int) { c.UDPAnswerLimit = v }
	sockets := func(c *ServerConfiguration, v int) { c.UDPSockets = v }
	var ms []mutation
	for _, tc := range []struct {
		name string
		set  func(*ServerConfiguration, int)
		v    int
		want string // "": valid
	}{
		{"udp answer limit", answer, 24, ""},
		{"udp answer limit most", answer, 100, ""},
		{"udp answer limit negative", answer, -1, `udpAnswerLimit: -1: must be between 0 (off) and 100`},
		{"udp answer limit too big", answer, 101, `udpAnswerLimit: 101: must be between 0 (off) and 100`},
		{"udp sockets GOMAXPROCS", sockets, 0, ""},
		{"udp sockets one", sockets, 1, ""},
		{"udp sockets most", sockets, 1024, ""},
		{"udp sockets negative", sockets, -1, `udpSockets: -1: must be between 0 (GOMAXPROCS) and 1024`},
		{"udp sockets too many", sockets, 1025, `udpSockets: 1025: must be between 0 (GOMAXPROCS) and 1024`},
	} {
		m := mutation{name: tc.name, mutate: func(c *ServerConfiguration) { tc.set(c, tc.v) }}
		if tc.want != "" {
			m.want = []string{tc.want}
		}
		ms = append(ms, m)
	}
	checkMutations(t, ms)
}
