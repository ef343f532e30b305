package corefile

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

func isReverse(z string) bool {
	return strings.HasSuffix(z, "in-addr.arpa.") || strings.HasSuffix(z, "ip6.arpa.")
}

// kubernetes: the cluster domain and the record options.
func (c *converter) kubernetes(s scope, d Directive) {
	if c.kube != "" {
		c.add(d.Where, d.Name, Dropped, "a second kubernetes (first at %s): one cluster domain per server; workaround: run a second dnsconfigurer serve and forward its zone to it", c.kube)
		return
	}
	c.kube = d.Where
	zones := d.Args
	if len(zones) == 0 {
		zones = s.zones
	}
	nrefused := len(c.refused)
	mc := c.kubeMulticluster(d, zones)
	if len(c.refused) > nrefused {
		return
	}
	var cluster string
	var reverse, extra, ignored []string
	var cidrs []netip.Prefix
	for _, z := range zones {
		if p, ok, bad := cidrZone(z); ok {
			if bad {
				ignored = append(ignored, z)
			} else if !slices.Contains(cidrs, p) {
				cidrs = append(cidrs, p)
			}
			continue
		}
		z = fqdn(z)
		switch {
		case slices.Contains(mc, z):
			// The clusterset zone, no cluster domain: c.clusterset.
		case isReverse(z):
			reverse = append(reverse, z)
		case cluster == "" && z != ".":
			cluster = z
		case z == ".":
			extra = append(extra, z)
		default:
			extra = append(extra, strings.TrimSuffix(z, "."))
		}
	}
	done := []string{}
	if cluster != "" {
		c.cfg.ClusterDomain = strings.TrimSuffix(cluster, ".")
		done = append(done, "clusterDomain "+c.cfg.ClusterDomain)
	}
	if cluster == "" && len(extra) == 0 && len(mc) == 0 {
		c.refuse(d.Where, d.Name, "non-reverse zone name must be used")
		return
	}
	if cluster == "" && len(extra) == 0 {
		c.add(d.Where, d.Name, Differs, "no zone besides the multicluster zone: serve answers the cluster's Services and pods under clusterDomain %s too, where CoreDNS has no such zone", c.clusterDomain())
	}
	c.clusterset(d, mc)
	if len(ignored) > 0 {
		c.add(d.Where, d.Name, Converted, "%s: an invalid CIDR, which CoreDNS ignores: no zone", strings.Join(ignored, " "))
	}
	switch {
	case len(extra) > 0 && cluster == "":
		c.add(d.Where, d.Name, Dropped, "zones %s: the cluster's names under the root; serve answers them under clusterDomain %s; workaround: kubernetes with the cluster domain as its zone",
			strings.Join(extra, " "), v1alpha1.DefaultServerClusterDomain)
	case len(extra) > 0:
		c.add(d.Where, d.Name, Dropped, "zones %s: one cluster domain (%s); workaround: rewrite name suffix %s %s",
			strings.Join(extra, " "), c.cfg.ClusterDomain, extra[0], c.cfg.ClusterDomain)
		if slices.Contains(extra, kepZone) {
			// CoreDNS answers the cluster's own Services there, as the
			// rewrite does; the imports need the multicluster option.
			c.add(d.Where, d.Name, Dropped, "for the Multi-Cluster Services' imports, add multicluster %s to this kubernetes block: it becomes clustersetZone", kepZone)
		}
	}
	// CoreDNS keeps the last fallthrough line: each replaces the zones of
	// the one before.
	last := -1
	for i, o := range d.Options {
		if o.Name == "fallthrough" {
			last = i
		}
	}
	fell, fall := false, []string(nil)
	if last >= 0 {
		fall = fallZones(d.Options[last].Args)
	}
	for i, o := range d.Options {
		if o.Name == "fallthrough" && i != last {
			c.add(o.Where, d.Name, Differs, "fallthrough %s: replaced by the fallthrough at %s, as in CoreDNS, which keeps the last", strings.Join(o.Args, " "), d.Options[last].Where)
			continue
		}
		if note, ok := c.kubeOption(o, reverse, &fell); ok && note != "" {
			done = append(done, note)
		}
	}
	if len(cidrs) > 0 {
		done = append(done, c.reverseCIDRs(d, cidrs, fall, len(reverse) > 0)...)
	}
	if len(reverse) > 0 && !fell {
		c.add(d.Where, d.Name, Differs, "reverse names of no Service or pod are forwarded; CoreDNS answers them NXDOMAIN without fallthrough")
	}
	c.add(d.Where, d.Name, Converted, "%s", strings.Join(done, ", "))
}

// reverseArg: a zone argument that is reverse, by name or as a CIDR.
func reverseArg(z string) bool {
	_, cidr, _ := cidrZone(z)
	return cidr || isReverse(fqdn(z))
}

// kubeOption converts one option; ok false when it got a finding of its own.
func (c *converter) kubeOption(o Option, reverse []string, fell *bool) (string, bool) {
	arg := func(i int) string {
		if i < len(o.Args) {
			return o.Args[i]
		}
		return ""
	}
	switch o.Name {
	case "pods":
		c.cfg.Pods = arg(0)
		return "pods " + arg(0), true
	case "ttl":
		if len(o.Args) == 0 {
			c.refuse(o.Where, "kubernetes", "%v", argErr("ttl"))
			return "", false
		}
		n, err := strconv.Atoi(arg(0))
		if err != nil {
			c.refuse(o.Where, "kubernetes", "%v", err)
			return "", false
		}
		if n < 0 || n > v1alpha1.MaxRecordTTL {
			c.refuse(o.Where, "kubernetes", "ttl must be in range [0, 3600]: %d", n)
			return "", false
		}
		c.cfg.TTL = &n
		return "ttl " + arg(0), true
	case "namespaces":
		c.cfg.Namespaces = o.Args
		return "namespaces " + strings.Join(o.Args, " "), true
	case "endpoint_pod_names":
		c.cfg.EndpointPodNames = true
		return "endpointPodNames", true
	case "noendpoints":
		c.cfg.NoEndpoints = true
		return "noEndpoints", true
	case "ignore":
		if slices.Equal(o.Args, []string{"empty_service"}) {
			c.cfg.IgnoreEmptyService = true
			return "ignoreEmptyService", true
		}
	case "kubeconfig":
		c.cfg.Kubeconfig = arg(0)
		if len(o.Args) > 1 {
			c.add(o.Where, "kubernetes", Differs, "kubeconfig context %s: the kubeconfig's current context is used", arg(1))
			return "", false
		}
		return "kubeconfig " + arg(0), true
	case "fallthrough":
		*fell = len(o.Args) == 0
		for _, z := range o.Args {
			*fell = *fell || reverseArg(z)
		}
		for _, z := range o.Args {
			if !reverseArg(z) {
				c.add(o.Where, "kubernetes", Differs, "fallthrough %s: names of the cluster domain that do not exist are NXDOMAIN, never passed on", z)
				return "", false
			}
		}
		if len(o.Args) == 0 {
			c.add(o.Where, "kubernetes", Differs, "fallthrough: names of the cluster domain that do not exist are NXDOMAIN, never passed on; reverse names are forwarded")
			return "", false
		}
		return "reverse names of no Service or pod forwarded", true
	case "endpoint", "tls":
		c.add(o.Where, "kubernetes", Dropped, "%s: the API server comes from a kubeconfig; workaround: kubeconfig: with its address and certificates", o.Name)
		return "", false
	case "labels", "namespace_labels":
		c.add(o.Where, "kubernetes", Dropped, "%s: no label selectors; workaround: namespaces: lists the namespaces served", o.Name)
		return "", false
	case "multicluster":
		return "", false // kubeMulticluster
	case "startup_timeout":
		c.add(o.Where, "kubernetes", Differs, "startup_timeout: serve is not ready and answers the zone SERVFAIL until its first sync")
		return "", false
	}
	if !kubernetesProperties[o.Name] {
		c.refuse(o.Where, "kubernetes", "unknown property '%s'", o.Name)
		return "", false
	}
	c.add(o.Where, "kubernetes", Dropped, "%s: not supported", o.Name)
	return "", false
}

// kubernetesProperties are the options CoreDNS's kubernetes plugin knows;
// any other is refused ("upstream" since CoreDNS 1.7).
var kubernetesProperties = map[string]bool{"endpoint_pod_names": true, "pods": true, "namespaces": true, "endpoint": true, "tls": true,
	"labels": true, "namespace_labels": true, "fallthrough": true, "ttl": true, "noendpoints": true, "zonal": true, "ignore": true,
	"kubeconfig": true, "multicluster": true, "startup_timeout": true, "apiserver_qps": true, "apiserver_burst": true, "apiserver_max_inflight": true}

// autopath @kubernetes: server-side search expansion for pods.
func (c *converter) autopathDirective(_ scope, d Directive) {
	if len(d.Args) != 1 || d.Args[0] != "@kubernetes" {
		c.add(d.Where, d.Name, Dropped, "autopath %s: only @kubernetes is supported; workaround: pod dnsConfig searches", strings.Join(d.Args, " "))
		return
	}
	c.autopath = true
	c.cfg.AutopathBySource = true
	c.add(d.Where, d.Name, Converted, "autopathBySource with pods: verified, as autopath needs")
}
