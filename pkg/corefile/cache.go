package corefile

import (
	"fmt"
	"strconv"
	"strings"
	"time"

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
	if len(d.Args) > 0 {
		if ttl, err := intArg(d.Args[0]); err == nil && ttl <= 0 {
			c.refuse(d.Where, d.Name, "cache TTL can not be zero or negative: %d", ttl)
			return
		}
	}
	for _, o := range d.Options {
		if err := cacheOptionErr(o); err != nil {
			c.refuse(o.Where, d.Name, "%v", err)
			return
		}
	}
	if !s.main {
		c.zoneCache(s, d)
		return
	}
	c.cache = d.Where
	done := c.fillCache(&c.cfg.Cache, d)
	c.add(d.Where, d.Name, Converted, "%s", strings.Join(append(done, "minTTL 5s as CoreDNS"), ", "))
}

// fillCache sets cc as the cache directive d says, from CoreDNS's
// defaults, and returns what it set.
func (c *converter) fillCache(cc *v1alpha1.ServerCache, d Directive) []string {
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
		c.add(d.Where, d.Name, Differs, "zones %s: every answer of the block is cached", strings.Join(args, " "))
	}
	for _, o := range d.Options {
		if note := c.cacheOption(cc, o); note != "" {
			done = append(done, note)
		}
	}
	return done
}

// zoneCache: the cache of another zone's block is the cache policy of
// that zone's forward route (finish sets it); its capacities are shared.
func (c *converter) zoneCache(s scope, d Directive) {
	var cc v1alpha1.ServerCache
	done := c.fillCache(&cc, d)
	if cc.SuccessBytes != "" || cc.DenialBytes != "" {
		c.add(d.Where, d.Name, Differs, "in the %s block: the capacities are shared with the main block's cache (cache.successBytes, cache.denialBytes)", strings.Join(s.zones, " "))
	}
	rc := &v1alpha1.RouteCache{CacheTTLs: cc.CacheTTLs}
	if cc.Prefetch.Amount > 0 {
		p := cc.Prefetch
		rc.Prefetch = &p
	}
	for _, z := range s.zones {
		c.zoneCaches[z] = zoneCache{rc: rc, where: d.Where}
	}
	c.add(d.Where, d.Name, Converted, "the cache of the route of %s: %s", strings.Join(s.zones, " "), strings.Join(append(done, "minTTL 5s as CoreDNS"), ", "))
}

// zoneCache is a block's cache, for its zone's route.
type zoneCache struct {
	rc    *v1alpha1.RouteCache
	where string
}

// routeCaches gives each route of another zone's block its block's cache
// policy, or none (CoreDNS caches nothing of a block without cache).
func (c *converter) routeCaches() {
	used := map[string]bool{}
	for i := range c.cfg.Forward {
		r := &c.cfg.Forward[i]
		z := fqdn(r.Zone)
		if z == "." {
			continue // the root's answers follow cache:
		}
		if zc, ok := c.zoneCaches[z]; ok {
			r.Cache, used[z] = zc.rc, true
			continue
		}
		if c.blockRoutes[z] {
			r.Cache = &v1alpha1.RouteCache{Disabled: true}
			c.add(c.routeWhere[r.Zone], "forward", Converted, "route %s: not cached (cache.disabled), as CoreDNS caches nothing of a block without cache", r.Zone)
		}
	}
	for z, zc := range c.zoneCaches {
		if !used[z] && z != "." {
			c.add(zc.where, "cache", Differs, "the %s block forwards nothing: its cache applies to no route", z)
		}
	}
}

func (c *converter) cacheOption(cc *v1alpha1.ServerCache, o Option) string {
	switch o.Name {
	case "success", "denial":
		if len(o.Args) == 0 {
			break
		}
		// CoreDNS's cache has 256 shards of at least 4 entries each: a
		// capacity under 1,024 (0 included) holds 1,024.
		entries := max(atoi(o.Args[0])/256, 4) * 256
		size := v1alpha1.ByteSize(fmt.Sprintf("%dKi", (entries*bytesPerEntry+1023)/1024))
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
		c.add(o.Where, "cache", Differs, "%s %s entries (CoreDNS holds %d): bounded as %s bytes (%d bytes an entry)", o.Name, o.Args[0], entries, size, bytesPerEntry)
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

// cacheDisable: the cluster zone's and the clusterset zone's answers are
// never in the cache of forwarded answers, so disabling the cache there is
// what serve does.
func (c *converter) cacheDisable(o Option) string {
	cluster := fqdn(c.clusterDomain())
	set := c.cfg.ClustersetZone
	inside := func(z, zone string) bool {
		return zone != "" && (z == fqdn(zone) || strings.HasSuffix(z, "."+fqdn(zone)))
	}
	for _, z := range o.Args[min(1, len(o.Args)):] {
		if z := fqdn(z); !inside(z, cluster) && !inside(z, set) {
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

// argErr is caddy's Dispenser.ArgErr message, which CoreDNS's setups
// return for a wrong number of arguments.
func argErr(after string) error {
	return fmt.Errorf("Wrong argument count or unexpected line ending after '%s'", after)
}

// intArg is strconv.Atoi's result and error, as CoreDNS reports it.
func intArg(s string) (int, error) { return strconv.Atoi(s) }

// cacheOptionErr is what CoreDNS's cache setup refuses in an option.
func cacheOptionErr(o Option) error {
	a := o.Args
	switch o.Name {
	case "success", "denial":
		if len(a) == 0 {
			return argErr(o.Name)
		}
		if _, err := intArg(a[0]); err != nil {
			return err
		}
		if len(a) > 1 {
			ttl, err := intArg(a[1])
			if err != nil {
				return err
			}
			if ttl <= 0 {
				return fmt.Errorf("cache TTL can not be zero or negative: %d", ttl)
			}
		}
		if len(a) > 2 {
			minTTL, err := intArg(a[2])
			if err != nil {
				return err
			}
			if minTTL < 0 {
				return fmt.Errorf("cache min TTL can not be negative: %d", minTTL)
			}
		}
	case "prefetch":
		if len(a) == 0 || len(a) > 3 {
			return argErr(o.Name)
		}
		n, err := intArg(a[0])
		if err != nil {
			return err
		}
		if n < 0 {
			return fmt.Errorf("prefetch amount should be positive: %d", n)
		}
		if len(a) > 1 {
			if _, err := time.ParseDuration(a[1]); err != nil {
				return err
			}
		}
		if len(a) > 2 {
			pct, ok := strings.CutSuffix(a[2], "%")
			if !ok {
				return fmt.Errorf("last character of percentage should be `%%`, but is: %q", a[2][len(a[2])-1])
			}
			num, err := intArg(pct)
			if err != nil {
				return err
			}
			if num < 10 || num > 90 {
				return fmt.Errorf("percentage should fall in range [10, 90]: %d", num)
			}
		}
	case "serve_stale":
		if len(a) > 5 {
			return argErr(o.Name)
		}
		if len(a) > 0 {
			d, err := time.ParseDuration(a[0])
			if err != nil {
				return err
			}
			if d < 0 {
				return fmt.Errorf("invalid negative duration for serve_stale")
			}
		}
		if len(a) > 1 && a[1] != "immediate" && a[1] != "verify" {
			return fmt.Errorf("invalid value for serve_stale refresh mode: %s", a[1])
		}
	case "servfail":
		if len(a) != 1 {
			return argErr(o.Name)
		}
		d, err := time.ParseDuration(a[0])
		if err != nil {
			return err
		}
		if d < 0 {
			return fmt.Errorf("invalid negative ttl for servfail")
		}
		if d > 5*time.Minute {
			return fmt.Errorf("caching SERVFAIL responses over 5 minutes is not permitted")
		}
	case "disable":
		if len(a) < 1 {
			return argErr(o.Name)
		}
		if a[0] != "success" && a[0] != "denial" {
			return fmt.Errorf("cache type for disable must be %q or %q", "success", "denial")
		}
	case "keepttl":
		if len(a) != 0 {
			return argErr(o.Name)
		}
	case "serve_stale_policy":
		if len(a) != 1 {
			return argErr(o.Name)
		}
	default:
		return argErr(o.Name)
	}
	return nil
}
