package corefile

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// k8sExternal: k8s_external [ZONE...] { apex APEX; ttl TTL; headless;
// fallthrough [ZONE...] }, as CoreDNS's k8s_external parse reads it, to
// the external field. Its zones default to the block's. CoreDNS refuses it
// at startup in a block without a kubernetes plugin.
func (c *converter) k8sExternal(s scope, d Directive) {
	if !s.kubernetes {
		c.refuse(d.Where, d.Name, "kubernetes plugin not loaded")
		return
	}
	x := v1alpha1.External{}
	var differs []string
	for _, o := range d.Options {
		switch o.Name {
		case "ttl":
			if len(o.Args) == 0 {
				c.refuse(o.Where, d.Name, "%v", argErr(o.Name))
				return
			}
			t, err := strconv.Atoi(o.Args[0])
			if err != nil {
				c.refuse(o.Where, d.Name, "%v", err)
				return
			}
			if t < 0 || t > 3600 {
				c.refuse(o.Where, d.Name, "ttl must be in range [0, 3600]: %d", t)
				return
			}
			x.TTL = &t
		case "apex":
			if len(o.Args) == 0 {
				c.refuse(o.Where, d.Name, "%v", argErr(o.Name))
				return
			}
			x.Apex = o.Args[0]
		case "headless":
			differs = append(differs, "headless: a headless Service's endpoints are not answered under the zones (only external IPs)")
		case "fallthrough":
			x.Fallthrough = true
			if len(o.Args) > 0 {
				differs = append(differs, "fallthrough "+strings.Join(o.Args, " ")+": every NXDOMAIN of the zones is forwarded, not only these zones'")
			}
		default:
			c.refuse(o.Where, d.Name, "unknown property '%s'", o.Name)
			return
		}
	}
	if c.cfg.External != nil {
		c.add(d.Where, d.Name, Dropped, "a second k8s_external: one set of external zones is served (external)")
		return
	}
	zones := s.zones
	if len(d.Args) > 0 {
		zones = nil
		for _, z := range d.Args {
			zones = append(zones, fqdn(z))
		}
	}
	x.Zones = blockZones(zones, s)
	if len(x.Zones) == 0 {
		c.add(d.Where, d.Name, Dropped, "its zones %s are outside the block's %s: CoreDNS never asks it", strings.Join(zones, " "), strings.Join(s.zones, " "))
		return
	}
	c.cfg.External = &x
	differs = append(differs, "the NS record of the apex has no addresses in the additional section, and ns1."+
		cmp.Or(x.Apex, v1alpha1.DefaultExternalApex)+".<zone> none: CoreDNS gives its own Service's external IPs; the SOA serial is the zone's, not the time of the last change of a Service with external IPs")
	what := fmt.Sprintf("external: Services' external IPs under %s", strings.Join(x.Zones, " "))
	c.add(d.Where, d.Name, Differs, "%s; %s", what, strings.Join(differs, "; "))
}
