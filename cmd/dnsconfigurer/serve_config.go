package main

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// routeFlag is --forward ZONE=ADDR[,ADDR...], repeatable.
type routeFlag []v1alpha1.ForwardRoute

func (r *routeFlag) String() string {
	var parts []string
	for _, rt := range *r {
		parts = append(parts, rt.Zone+"="+strings.Join(rt.Upstreams, ","))
	}
	return strings.Join(parts, " ")
}

func (r *routeFlag) Set(v string) error {
	zone, addrs, ok := strings.Cut(v, "=")
	if !ok || zone == "" || addrs == "" {
		return fmt.Errorf("%q: want ZONE=ADDR[,ADDR...], e.g. .=10.0.0.2 or corp.example=10.1.0.53:53", v)
	}
	if _, ok := dns.IsDomainName(zone); !ok {
		return fmt.Errorf("%q: zone %q is not a domain name", v, zone)
	}
	ups := flaglayer.SplitList(addrs)
	for _, u := range ups {
		if strings.HasPrefix(u, "/") || strings.HasPrefix(u, "$(") {
			// A resolv.conf whose nameservers are the upstreams; an
			// unexpanded variable, which validation explains.
			continue
		}
		if _, err := forward.ParseAddrPort(u); err != nil {
			return fmt.Errorf("%q: upstream %q is not an address such as 10.0.0.53, 10.0.0.53:53 or [fd00::53]:53, nor a resolv.conf path", v, u)
		}
	}
	*r = append(*r, v1alpha1.ForwardRoute{Zone: zone, Upstreams: ups})
	return nil
}

// serverConfig is the configuration serve runs: the --config file (when
// given), then every flag set on the command line over it, then defaults;
// validated, with errors naming the flag or field. It is called again on
// every reload of the file, with the same flags.
func (a *serveArgs) serverConfig() (*serverConfig, error) {
	cfg := &serverConfig{}
	if err := a.layer.Load(a.config, v1alpha1.ServerKind, cfg); err != nil {
		return nil, a.layer.Named(err)
	}
	if err := cfg.CheckComplete(); err != nil {
		return nil, usageError{a.layer.Named(err)}
	}
	return cfg, nil
}

// replaceRoute puts r in routes, in place of a route of the same zone.
func replaceRoute(routes []v1alpha1.ForwardRoute, r v1alpha1.ForwardRoute) []v1alpha1.ForwardRoute {
	for i := range routes {
		if strings.EqualFold(strings.TrimSuffix(routes[i].Zone, "."), strings.TrimSuffix(r.Zone, ".")) {
			routes[i].Upstreams = r.Upstreams
			return routes
		}
	}
	return append(routes, r)
}
