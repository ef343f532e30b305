package corefile

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// The placeholders node-cache fills in its Corefile at start.
const (
	pillarClusterDNS = "__PILLAR__CLUSTER__DNS__"
	pillarUpstreams  = "__PILLAR__UPSTREAM__SERVERS__"
)

// NodeLocal converts NodeLocal DNSCache's Corefile (node-cache's, as its
// addon and kubespray ship it) into a ServerConfiguration of mode
// node-local: the cluster domain's block gives nodeLocal.clusterUpstream
// and the cache, bind gives nodeLocal.localIPs, the root block's forward
// gives nodeLocal.external. It stops with ctx's error when ctx ends.
func NodeLocal(ctx context.Context, in Input) (Result, error) {
	blocks, imports, err := Parse(ctx, in)
	if err != nil {
		return Result{}, err
	}
	// What CoreDNS refuses, in any block, is found as Convert finds it.
	probe := newConverter()
	probe.pillars = true
	for _, b := range blocks {
		probe.block(b, false)
	}
	if len(probe.refused) > 0 {
		return Result{}, errors.Join(probe.refused...)
	}
	c := newConverter()
	c.cfg.APIVersion, c.cfg.Kind, c.cfg.Mode = v1alpha1.GroupVersion, v1alpha1.ServerKind, v1alpha1.ModeNodeLocal
	cluster := clusterBlock(blocks)
	for i, b := range blocks {
		c.nodeLocalBlock(b, i == cluster)
	}
	if cluster < 0 {
		c.add(in.Name, "server", Differs, "no block for the cluster domain (one that forwards to the cluster DNS, as the reverse zones do): set nodeLocal.clusterUpstream, or --cluster-upstream")
	}
	out := append(imports, c.out...)
	sort.SliceStable(out, func(i, j int) bool { return lessWhere(out[i].Where, out[j].Where, in.Name) })
	r := Result{Config: c.cfg, Findings: merge(out)}
	return r, check(r.Config, c.fieldWhere(in.Name))
}

// clusterBlock is the index of the cluster domain's block: among the
// blocks neither of the root nor of a reverse zone, the one that forwards
// where the reverse zones do, over TCP (node-cache's template), with a
// zone named cluster.local breaking ties; -1 if there is none.
func clusterBlock(blocks []Block) int {
	reverseTo := ""
	for _, b := range blocks {
		if z := blockZone(b); isReverse(z) {
			reverseTo = forwardTo(b)
		}
	}
	best, bestScore := -1, -1
	for i, b := range blocks {
		z := blockZone(b)
		if z == "." || isReverse(z) {
			continue
		}
		score := 0
		if reverseTo != "" && forwardTo(b) == reverseTo {
			score += 4
		}
		if forcesTCP(b) {
			score += 2
		}
		if z == "cluster.local." {
			score++
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}

// forcesTCP: the block's forward has force_tcp.
func forcesTCP(b Block) bool {
	for _, d := range b.Directives {
		if d.Name == "forward" {
			for _, o := range d.Options {
				if o.Name == "force_tcp" {
					return true
				}
			}
		}
	}
	return false
}

func blockZone(b Block) string {
	if len(b.Keys) == 0 {
		return ""
	}
	z, _, _ := splitKey(b.Keys[0])
	return z
}

// forwardTo is a block's forward targets, joined.
func forwardTo(b Block) string {
	for _, d := range b.Directives {
		if d.Name == "forward" && len(d.Args) > 1 {
			return strings.Join(d.Args[1:], " ")
		}
	}
	return ""
}

func (c *converter) nodeLocalBlock(b Block, cluster bool) {
	z := blockZone(b)
	s := scope{main: cluster, zones: []string{z}}
	switch {
	case cluster:
		c.cfg.ClusterDomain = strings.TrimSuffix(z, ".")
		c.add(b.Where, "server", Converted, "%s: the cluster domain %s, sent to nodeLocal.clusterUpstream over TCP", strings.Join(b.Keys, " "), c.cfg.ClusterDomain)
	case isReverse(z):
		c.add(b.Where, "server", Converted, "%s: reverse names go to nodeLocal.clusterUpstream", strings.Join(b.Keys, " "))
	case z == ".":
		c.add(b.Where, "server", Converted, "%s: the other names, by nodeLocal.external", strings.Join(b.Keys, " "))
	default:
		c.add(b.Where, "server", Differs, "%s: its names go to the cluster DNS (nodeLocal.external: cluster), not to %s; "+
			"put the route in the cluster DNS's configuration (forward: zone %s) to keep its answers", strings.Join(b.Keys, " "), forwardTo(b), strings.TrimSuffix(z, "."))
		return
	}
	for _, d := range b.Directives {
		switch d.Name {
		case "bind":
			c.nodeLocalBind(d)
		case "forward":
			c.nodeLocalForward(d, z, cluster)
		case "cache":
			if cluster {
				c.cacheDirective(s, d)
			} else {
				c.add(d.Where, d.Name, Differs, "one cache for every name; the settings of the cluster domain's block apply")
			}
		case "prometheus", "health":
			if c.cfg.MetricsListen != "" && d.Name == "prometheus" {
				continue
			}
			handlers[d.Name](c, s, d)
		case "errors", "reload", "loop", "log", "cancel":
			handlers[d.Name](c, s, d)
		default:
			c.add(d.Where, d.Name, Dropped, "not in the node-local stage, which answers no name itself; workaround: put it in the cluster DNS's configuration")
		}
	}
}

func (c *converter) nodeLocalBind(d Directive) {
	for _, a := range d.Args {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			c.add(d.Where, d.Name, Dropped, "%s: not an IP address (interface names are not supported); workaround: list its addresses", a)
			continue
		}
		if ip.IsUnspecified() {
			// Every address of the node: no local IP to set up.
			c.cfg.Listen = []string{netip.AddrPortFrom(ip, 53).String()}
			c.add(d.Where, d.Name, Converted, "listen %s: every address of the node, no local IP set up", c.cfg.Listen[0])
			continue
		}
		if !slices.Contains(c.cfg.NodeLocal.LocalIPs, ip.String()) {
			c.cfg.NodeLocal.LocalIPs = append(c.cfg.NodeLocal.LocalIPs, ip.String())
		}
	}
	if len(c.cfg.NodeLocal.LocalIPs) > 0 && !c.cfg.NodeLocal.SetupInterface {
		c.cfg.NodeLocal.SetupInterface, c.cfg.NodeLocal.SetupNotrack = true, true
		c.add(d.Where, d.Name, Converted, "nodeLocal.localIPs %s, set up on the node's interface with NOTRACK rules, as node-cache does", strings.Join(c.cfg.NodeLocal.LocalIPs, " "))
	}
}

func (c *converter) nodeLocalForward(d Directive, zone string, cluster bool) {
	if len(d.Args) < 2 {
		c.add(d.Where, d.Name, Dropped, "forward needs FROM and at least one TO")
		return
	}
	to := d.Args[1:]
	switch {
	case cluster && slices.Contains(to, pillarClusterDNS):
		c.add(d.Where, d.Name, Differs, "%s is filled by node-cache from its -upstreamsvc Service: set nodeLocal.clusterUpstream (or --cluster-upstream) to that Service's ClusterIP (kube-dns-upstream)", pillarClusterDNS)
	case cluster:
		for _, a := range to {
			c.cfg.NodeLocal.ClusterUpstream = append(c.cfg.NodeLocal.ClusterUpstream, strings.TrimPrefix(a, "dns://"))
		}
		c.add(d.Where, d.Name, Converted, "nodeLocal.clusterUpstream %s, over TCP", strings.Join(c.cfg.NodeLocal.ClusterUpstream, " "))
	case isReverse(zone):
		if strings.Join(to, " ") != strings.Join(c.cfg.NodeLocal.ClusterUpstream, " ") && !slices.Contains(to, pillarClusterDNS) {
			c.add(d.Where, d.Name, Differs, "reverse names go to nodeLocal.clusterUpstream, not %s", strings.Join(to, " "))
		}
	case len(to) == 1 && (to[0] == pillarUpstreams || strings.HasPrefix(to[0], "/")):
		rc := "/etc/resolv.conf"
		if strings.HasPrefix(to[0], "/") {
			rc = to[0]
		}
		c.cfg.NodeLocal.External, c.cfg.NodeLocal.ResolvConf = v1alpha1.ExternalDirect, &rc
		c.add(d.Where, d.Name, Converted, "nodeLocal.external direct: the other names go to the nameservers of %s", rc)
	case strings.Join(to, " ") == strings.Join(c.cfg.NodeLocal.ClusterUpstream, " "):
		c.cfg.NodeLocal.External = v1alpha1.ExternalCluster
		c.add(d.Where, d.Name, Converted, "nodeLocal.external cluster: the other names go to the cluster DNS")
	default:
		c.cfg.NodeLocal.External = v1alpha1.ExternalCluster
		c.add(d.Where, d.Name, Differs, "the other names go to the cluster DNS (nodeLocal.external cluster), not to %s; put that upstream in the cluster DNS's forward", strings.Join(to, " "))
	}
}
