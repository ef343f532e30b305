package forward

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// Exchanger sends a query and returns the reply (*Forwarder implements it).
type Exchanger interface {
	Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error)
}

// Route sends the names under Zone, except those under one of Except, to
// Upstream (stub domains, conditional forwarding; "." is the default route).
type Route struct {
	Zone     string
	Except   []string
	Upstream Exchanger
}

// Router picks the route of each query: the longest Zone that contains the
// name and does not except it; a name excepted by a route goes to the next
// less specific route. With none, Exchange fails with ErrNoUpstream.
type Router struct {
	routes []Route // longest zone first
}

var _ Exchanger = (*Router)(nil)

// NewRouter validates routes (zones are domain names, at most one route
// per zone, each excepted name inside its zone, an upstream each) and
// returns their Router. Errors name the route: `routes[1].zone: ...`.
func NewRouter(routes []Route) (*Router, error) {
	var errs []error
	seen := map[string]int{}
	r := &Router{}
	for i, rt := range routes {
		zone := dns.CanonicalName(rt.Zone)
		if _, ok := dns.IsDomainName(zone); !ok || rt.Zone == "" {
			errs = append(errs, fmt.Errorf("routes[%d].zone: %q is not a domain name", i, rt.Zone))
			continue
		}
		if j, dup := seen[zone]; dup {
			errs = append(errs, fmt.Errorf("routes[%d].zone: %q is also routes[%d]'s", i, rt.Zone, j))
			continue
		}
		seen[zone] = i
		if rt.Upstream == nil {
			errs = append(errs, fmt.Errorf("routes[%d].upstream: none", i))
		}
		out := Route{Zone: zone, Upstream: rt.Upstream}
		for k, e := range rt.Except {
			ex := dns.CanonicalName(e)
			if _, ok := dns.IsDomainName(ex); !ok || !dns.IsSubDomain(zone, ex) {
				errs = append(errs, fmt.Errorf("routes[%d].except[%d]: %q is not a name inside %q", i, k, e, zone))
				continue
			}
			out.Except = append(out.Except, ex)
		}
		r.routes = append(r.routes, out)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.SliceStable(r.routes, func(a, b int) bool {
		return dns.CountLabel(r.routes[a].Zone) > dns.CountLabel(r.routes[b].Zone)
	})
	return r, nil
}

// Route returns the upstream of name, or nil.
func (r *Router) Route(name string) Exchanger {
	name = strings.ToLower(dns.Fqdn(name))
next:
	for _, rt := range r.routes {
		if !dns.IsSubDomain(rt.Zone, name) {
			continue
		}
		for _, ex := range rt.Except {
			if dns.IsSubDomain(ex, name) {
				continue next
			}
		}
		return rt.Upstream
	}
	return nil
}

// CheckLoop is the CheckLoop of the upstream of m's route, when it has one
// (a Forwarder does): ErrLoop for a query that came back to it.
func (r *Router) CheckLoop(m *dns.Msg) error {
	if len(m.Question) != 1 {
		return nil
	}
	if lc, ok := r.Route(m.Question[0].Name).(interface{ CheckLoop(*dns.Msg) error }); ok {
		return lc.CheckLoop(m)
	}
	return nil
}

// Exchange is Forward for the zero Origin.
func (r *Router) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	return r.Forward(ctx, m, dnsmsg.Origin{})
}

// Forward sends m, asked by o, to the upstream of its question's route:
// with o when the upstream takes it (a *Forwarder does).
func (r *Router) Forward(ctx context.Context, m *dns.Msg, o dnsmsg.Origin) (*dns.Msg, error) {
	if len(m.Question) != 1 {
		return nil, ErrNoUpstream
	}
	up := r.Route(m.Question[0].Name)
	if up == nil {
		return nil, ErrNoUpstream
	}
	return Ask(ctx, up, m, o)
}

// Ask asks e for m on behalf of o: e.Forward when e takes an Origin
// (Forwarding), else e.Exchange.
func Ask(ctx context.Context, e Exchanger, m *dns.Msg, o dnsmsg.Origin) (*dns.Msg, error) {
	if f, ok := e.(Forwarding); ok {
		return f.Forward(ctx, m, o)
	}
	return e.Exchange(ctx, m)
}

// Forwarding is an upstream that takes the Origin of a query (*Forwarder
// and *Router do): its client's share of the slots, its transport.
type Forwarding interface {
	Forward(ctx context.Context, m *dns.Msg, o dnsmsg.Origin) (*dns.Msg, error)
}
