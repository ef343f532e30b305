package corefile

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// Result is a converted configuration and the fate of each directive.
type Result struct {
	Config   v1alpha1.ServerConfiguration
	Findings []Finding
	// Files are the input ConfigMap's keys the output ConfigMap carries
	// (key → content): a hosts file, when ConfigMapKeys.Carry is set.
	Files map[string]string
	// refused are the directives CoreDNS refuses at setup (Run's error).
	refused error
}

// converter holds the state of one Convert.
type converter struct {
	cfg    v1alpha1.ServerConfiguration
	out    []Finding
	port   string         // the main server block's port
	routes map[string]int // zone → index in cfg.Forward
	hosts  string         // where the hosts file came from
	// mainHosts is the hosts file of the root zone's block, if any.
	mainHosts string
	cache     string // where the cache came from
	kube      string // where the kubernetes directive came from
	main      string // where the root zone's block is
	// routeWhere is where each route's forward is.
	routeWhere map[string]string
	autopath   bool
	// refused: what CoreDNS's setup refuses, with its reason.
	refused []error
	// zoneCaches are the caches of other zones' blocks, by zone;
	// blockRoutes the zones whose route such a block made.
	zoneCaches  map[string]zoneCache
	blockRoutes map[string]bool
	// blocks are the zones of every server block, which CoreDNS routes
	// their names to.
	blocks []string
	// pillars: node-cache's __PILLAR__ placeholders stand for addresses.
	pillars bool
	// entryAt is where each list entry of the configuration came from
	// ("forward[0]", "rewrites[1]"), for the errors of its fields.
	entryAt map[string]string
}

// scope is the server block a directive is in.
type scope struct {
	main  bool     // the root zone's block
	zones []string // its zones, FQDN
	port  string
	// kubernetes: the block has a kubernetes plugin (k8s_external needs
	// one).
	kubernetes bool
}

// Convert maps the server blocks of a Corefile onto a ServerConfiguration.
func Convert(blocks []Block) Result {
	r, _ := convert(blocks)
	return r
}

// convert is Convert, with the converter for where its fields came from.
func convert(blocks []Block) (Result, *converter) {
	c := newConverter()
	c.cfg.APIVersion = v1alpha1.GroupVersion
	c.cfg.Kind = v1alpha1.ServerKind
	mainIdx := -1
	for i, b := range blocks {
		for _, k := range b.Keys {
			if z, p, err := splitKey(k); err == nil && z == "." && mainIdx < 0 {
				mainIdx, c.port = i, p
			}
		}
	}
	c.cfg.Listen = []string{":" + c.port}
	for _, b := range blocks {
		for _, k := range b.Keys {
			if z, _, err := splitKey(k); err == nil {
				c.blocks = appendNew(c.blocks, z)
			}
		}
	}
	if mainIdx >= 0 {
		c.mainHosts = hostsFile(blocks[mainIdx])
	}
	for i, b := range blocks {
		c.block(b, i == mainIdx)
	}
	c.finish()
	for i, r := range c.cfg.Forward {
		c.entryAt[fmt.Sprintf("forward[%d]", i)] = c.routeWhere[r.Zone]
	}
	return Result{Config: c.cfg, Findings: c.out, refused: errors.Join(c.refused...)}, c
}

// refuse records a directive CoreDNS refuses, with the reason its setup
// gives: the input is invalid, so convert fails.
func (c *converter) refuse(where, plugin, format string, args ...any) {
	c.refused = append(c.refused, fmt.Errorf("%s: %s: %s (CoreDNS refuses it too)", where, plugin, fmt.Sprintf(format, args...)))
}

func newConverter() *converter {
	return &converter{routes: map[string]int{}, routeWhere: map[string]string{}, port: "53", entryAt: map[string]string{},
		zoneCaches: map[string]zoneCache{}, blockRoutes: map[string]bool{}}
}

func (c *converter) add(where, plugin string, s Status, format string, args ...any) {
	c.out = append(c.out, Finding{Where: where, Plugin: plugin, Status: s, Reason: fmt.Sprintf(format, args...)})
}

// splitKey reads a server block key: [dns://]zone[:port].
func splitKey(k string) (zone, port string, err error) {
	rest := k
	if i := strings.Index(rest, "://"); i >= 0 {
		if scheme := rest[:i]; scheme != "dns" {
			return "", "", fmt.Errorf("%s:// servers are not supported; serve answers plain DNS over UDP and TCP", scheme)
		}
		rest = rest[i+3:]
	}
	port = "53"
	if h, p, err := net.SplitHostPort(rest); err == nil {
		rest, port = h, p
	}
	return fqdn(rest), port, nil
}

func fqdn(z string) string {
	z = strings.ToLower(z)
	if z == "" || z == "." {
		return "."
	}
	return strings.TrimSuffix(z, ".") + "."
}

func (c *converter) block(b Block, main bool) {
	s := scope{main: main, kubernetes: slices.ContainsFunc(b.Directives, func(d Directive) bool { return d.Name == "kubernetes" })}
	if main || c.main == "" {
		c.main = b.Where
	}
	for _, k := range b.Keys {
		z, p, err := splitKey(k)
		if err != nil {
			c.add(b.Where, "server", Dropped, "%s: %v", k, err)
			return
		}
		if atoi(p) < 0 || p == "" {
			// CoreDNS reads a port that is no number as part of the zone.
			c.refuse(b.Where, "server", "zone is not a valid domain name: %s", k)
			return
		}
		s.zones, s.port = append(s.zones, z), p
	}
	switch {
	case main && s.port != "53":
		c.add(b.Where, "server", Differs, "%s: listen :%s; a cluster DNS Service sends port 53 there", strings.Join(b.Keys, " "), s.port)
	case main:
		c.add(b.Where, "server", Converted, "%s: listen :%s", strings.Join(b.Keys, " "), s.port)
	case s.port != c.port:
		c.add(b.Where, "server", Differs, "%s: its names are served on the main listen :%s, not port %s", strings.Join(b.Keys, " "), c.port, s.port)
	default:
		c.add(b.Where, "server", Converted, "%s: its names are served on listen :%s", strings.Join(b.Keys, " "), c.port)
	}
	seen := map[string]bool{}
	for _, d := range b.Directives {
		if onceOnly[d.Name] && seen[d.Name] {
			c.refuse(d.Where, d.Name, "this plugin can only be used once per Server Block")
			continue
		}
		seen[d.Name] = true
		if !c.refuseBare(d) {
			continue
		}
		if h, ok := handlers[d.Name]; ok {
			h(c, s, d)
			continue
		}
		c.add(d.Where, d.Name, Dropped, "%s", droppedReason(d.Name))
	}
}

// finish adds what depends on several directives.
func (c *converter) finish() {
	if c.autopath && c.cfg.Pods != v1alpha1.PodsVerified {
		c.cfg.Pods = v1alpha1.PodsVerified
	}
	cluster := fqdn(c.clusterDomain())
	// Without a kubernetes plugin CoreDNS answers no cluster: its names
	// go where any other name goes.
	c.cfg.NoClusterZone = c.kube == ""
	kept := c.cfg.Forward[:0]
	for _, r := range c.cfg.Forward {
		if fqdn(r.Zone) == cluster && !c.cfg.NoClusterZone {
			c.add(c.routeWhere[r.Zone], "forward", Dropped, "a route for the cluster domain %s itself: its names come from the cluster; workaround: forward a zone inside it", r.Zone)
			continue
		}
		kept = append(kept, r)
	}
	c.cfg.Forward = kept
	if c.main == "" {
		return // no server block: nothing to say it of
	}
	if len(c.cfg.Forward) == 0 {
		c.add(c.main, "server", Differs, "no forward: names outside the cluster domain are answered REFUSED, where CoreDNS answers SERVFAIL (no next plugin)")
	}
	if c.kube == "" {
		c.add(c.main, "server", Converted, "no kubernetes plugin: noClusterZone (no API server read; the names of %s and the reverse names answered as any other, as CoreDNS does)", cluster)
	}
	c.routeCaches()
	inherit := false
	for _, r := range c.cfg.Forward {
		inherit = inherit || r.Cache == nil
	}
	if c.cache == "" && inherit {
		c.add(c.main, "server", Differs, "no cache plugin: forwarded answers are cached here (cache.successBytes %s, maxTTL %s)",
			v1alpha1.DefaultSuccessBytes, v1alpha1.DefaultMaxTTL)
	}
}

// onceOnly are the plugins CoreDNS's setup takes once per server block
// (plugin.ErrOnce).
var onceOnly = map[string]bool{"cache": true, "dnssec": true, "errors": true, "grpc": true, "hosts": true, "kubernetes": true,
	"loop": true, "prometheus": true, "nsid": true, "pprof": true, "ready": true, "shed": true, "tsig": true, "view": true}

// simple are the directives with a fixed finding.
var simple = map[string]struct {
	s      Status
	reason string
}{
	"errors": {Converted, "errors are always logged"},
	"reload": {Converted, "serve --config reloads its file when it changes"},
	"loop":   {Converted, "forwarding loops are detected and broken (pkg/forward)"},
	"cancel": {Converted, "every query has a deadline"},
	"ready":  {Differs, "readiness is /readyz on metricsListen, not :8181/ready"},
	"debug":  {Differs, "no debug mode; logLevel: debug logs more"},
	"whoami": {Dropped, "no whoami answers; workaround: none needed for Kubernetes DNS"},
	"any":    {Differs, "ANY is answered minimally (RFC 8482) for the cluster's names only; other ANY queries are forwarded"},
	"tls":    {Dropped, "no DNS over TLS server; workaround: a TLS-terminating proxy in front"},
}

// handlers map a plugin to its conversion.
var handlers map[string]func(*converter, scope, Directive)

func init() {
	handlers = map[string]func(*converter, scope, Directive){
		"kubernetes":   (*converter).kubernetes,
		"forward":      (*converter).forward,
		"cache":        (*converter).cacheDirective,
		"hosts":        (*converter).hostsDirective,
		"rewrite":      (*converter).rewrite,
		"template":     (*converter).templateDirective,
		"k8s_external": (*converter).k8sExternal,
		"log":          (*converter).log,
		"health":       (*converter).health,
		"prometheus":   (*converter).prometheus,
		"loadbalance":  (*converter).loadbalance,
		"autopath":     (*converter).autopathDirective,
		"bind":         (*converter).bind,
	}
	for _, name := range outOfTree {
		handlers[name] = func(c *converter, s scope, d Directive) { c.add(d.Where, d.Name, Dropped, "%s", outOfTreeReason(s, d)) }
	}
	for name, f := range simple {
		handlers[name] = func(c *converter, _ scope, d Directive) { c.add(d.Where, d.Name, f.s, "%s", f.reason) }
	}
}
