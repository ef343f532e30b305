package corefile

import (
	"fmt"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// CoreDNS cache defaults (plugin/cache): TTL caps and the floor.
const (
	corednsMaxTTL    = "3600s"
	corednsMaxNegTTL = "1800s"
	corednsMinTTL    = "5s"
	// bytesPerEntry turns CoreDNS's capacity in entries into bytes: a
	// typical forwarded answer with its key and bookkeeping.
	bytesPerEntry = 512
)

// cacheDirective: TTL caps, capacities, prefetch and serve_stale.
func (c *converter) cacheDirective(s scope, d Directive) {
	if c.cache != "" {
		c.add(d.Where, d.Name, Differs, "one cache for every route; the settings of %s apply", c.cache)
		return
	}
	c.cache = d.Where
	cc := &c.cfg.Cache
	cc.MaxTTL, cc.MaxNegativeTTL = corednsMaxTTL, corednsMaxNegTTL
	cc.MinTTL, cc.MinNegativeTTL = corednsMinTTL, corednsMinTTL
	done := []string{}
	args := d.Args
	if len(args) > 0 && atoi(args[0]) >= 0 {
		cc.MaxTTL = v1alpha1.Duration(args[0] + "s")
		cc.MaxNegativeTTL = cc.MaxTTL
		done = append(done, fmt.Sprintf("maxTTL and maxNegativeTTL %ss", args[0]))
		args = args[1:]
	}
	if len(args) > 0 && !(len(args) == 1 && fqdn(args[0]) == ".") {
		c.add(d.Where, d.Name, Differs, "zones %s: every forwarded answer is cached", strings.Join(args, " "))
	}
	if !s.main {
		c.add(d.Where, d.Name, Differs, "in the %s block: one cache for every route, with these settings", strings.Join(s.zones, " "))
	}
	for _, o := range d.Options {
		if note := c.cacheOption(o); note != "" {
			done = append(done, note)
		}
	}
	c.add(d.Where, d.Name, Converted, "%s", strings.Join(append(done, "minTTL 5s as CoreDNS"), ", "))
}

func (c *converter) cacheOption(o Option) string {
	cc := &c.cfg.Cache
	switch o.Name {
	case "success", "denial":
		if len(o.Args) == 0 || atoi(o.Args[0]) < 0 {
			break
		}
		size := v1alpha1.ByteSize(fmt.Sprintf("%dKi", (atoi(o.Args[0])*bytesPerEntry+1023)/1024))
		maxp, minp := &cc.MaxTTL, &cc.MinTTL
		if o.Name == "success" {
			cc.SuccessBytes = size
		} else {
			cc.DenialBytes = size
			maxp, minp = &cc.MaxNegativeTTL, &cc.MinNegativeTTL
		}
		if len(o.Args) > 1 {
			*maxp = v1alpha1.Duration(o.Args[1] + "s")
		}
		if len(o.Args) > 2 {
			*minp = v1alpha1.Duration(o.Args[2] + "s")
		}
		c.add(o.Where, "cache", Differs, "%s %s entries: bounded as %s bytes (%d bytes an entry)", o.Name, o.Args[0], size, bytesPerEntry)
		return ""
	case "prefetch":
		if len(o.Args) == 0 {
			break
		}
		cc.Prefetch.Amount = atoi(o.Args[0])
		if len(o.Args) > 1 {
			cc.Prefetch.Window = v1alpha1.Duration(o.Args[1])
		}
		if len(o.Args) > 2 {
			cc.Prefetch.Percentage = atoi(strings.TrimSuffix(o.Args[2], "%"))
		}
		return "prefetch " + strings.Join(o.Args, " ")
	case "serve_stale":
		cc.ServeStale = "1h"
		if len(o.Args) > 0 {
			cc.ServeStale = v1alpha1.Duration(o.Args[0])
		}
		if len(o.Args) > 1 && o.Args[1] == "verify" {
			c.add(o.Where, "cache", Differs, "serve_stale verify: a stale answer is served when every upstream fails (immediate is not offered either)")
			return ""
		}
		return "serveStale " + string(cc.ServeStale)
	case "disable":
		return c.cacheDisable(o)
	case "keepttl":
		c.add(o.Where, "cache", Differs, "keepttl: cached answers count their TTL down")
		return ""
	case "servfail":
		c.add(o.Where, "cache", Differs, "servfail: SERVFAIL is never cached")
		return ""
	}
	c.add(o.Where, "cache", Dropped, "%s %s: not supported", o.Name, strings.Join(o.Args, " "))
	return ""
}

// cacheDisable: the cluster zone's answers are never in the cache of
// forwarded answers, so disabling the cache there is what serve does.
func (c *converter) cacheDisable(o Option) string {
	cluster := fqdn(c.clusterDomain())
	for _, z := range o.Args[min(1, len(o.Args)):] {
		if z := fqdn(z); z != cluster && !strings.HasSuffix(z, "."+cluster) {
			c.add(o.Where, "cache", Differs, "disable %s: answers of %s are cached like any forwarded answer", strings.Join(o.Args, " "), z)
			return ""
		}
	}
	return "disable " + strings.Join(o.Args, " ") + " (the zone's answers are not kept in this cache)"
}

func (c *converter) clusterDomain() string {
	if c.cfg.ClusterDomain == "" {
		return v1alpha1.DefaultServerClusterDomain
	}
	return c.cfg.ClusterDomain
}
