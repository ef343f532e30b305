package clusterdns

import (
	"net/netip"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/template"
)

// route is how a question is answered.
type route uint8

const (
	routeRefused     route = iota // REFUSED: a zone transfer, a class other than IN or ANY, no forwarder
	routeServfail                 // SERVFAIL: a zone or reverse name before the first sync
	routeZone                     // from the snapshot
	routeReverseAuth              // an authoritative reverse name the snapshot does not know
	routeStatic                   // from the Static records
	routeAutopath                 // a name under the autopath suffix: the search list is tried here
	routeForward                  // upstream (ANY too, as CoreDNS's forward)
	routeTemplate                 // from a template (WithTemplates)
	routeExternal                 // an external zone's name (WithExternal)
	routeClusterset               // the clusterset zone's name (WithClusterset), from its view in z
)

// decision is how one question is answered. decide makes it; every path
// (ServeDNS, Resolve and the wire paths) asks decide.
type decision struct {
	route route
	z     *zone           // the current zone view; nil before the first sync
	rrs   []dns.RR        // routeStatic: the static records of the asked type
	ra    *reverseAuth    // routeReverseAuth: the reverse zone
	tm    *template.Match // routeTemplate: the template and its groups
	ext   string          // routeExternal: the external zone
	// rewrite: rewrites are configured, so the name may be renamed
	// before it is answered. Only ServeDNS renames; the wire paths leave
	// such a query to it.
	rewrite bool
}

// refused is the rule for what is never answered: a class other than IN
// or ANY, and a zone transfer (never a zone listing, whatever the name).
func refused(qtype, qclass uint16) bool {
	return (qclass != dns.ClassINET && qclass != dns.ClassANY) ||
		qtype == dns.TypeAXFR || qtype == dns.TypeIXFR
}

// decide decides how a question of qtype and qclass for lname, its name
// in lowercase, is answered from z (the zone view of the query; nil before
// the first sync). It is the only place that does. lname may borrow the
// wire path's bytes: nothing it calls keeps it.
func decide(h *Handler, z *zone, qtype, qclass uint16, lname string) decision {
	if refused(qtype, qclass) {
		return decision{route: routeRefused}
	}
	if h.ap != nil && inZone(lname, autopath.Suffix) {
		// Never renamed: autopath renames each candidate instead.
		return decision{route: routeAutopath}
	}
	d := decision{rewrite: h.rw != nil}
	if h.tpl != nil {
		// Before the zone, hosts and forward, as CoreDNS's plugin order.
		switch tm, o := h.tpl.match(lname, qtype, qclass); o {
		case template.Answered:
			d.route, d.tm = routeTemplate, &tm
			return d
		case template.Servfail:
			d.route = routeServfail
			return d
		}
	}
	if h.ext != nil {
		// Before the cluster zone, as CoreDNS's plugin order.
		if d.ext = h.ext.zoneOf(lname); d.ext != "" {
			if d.z = z; d.z == nil {
				d.route = routeServfail
			} else {
				d.route = routeExternal
			}
			return d
		}
	}
	if h.cset != nil && inZone(lname, h.cset.name) {
		// Before the cluster zone: a clusterset zone inside it (refused
		// by the configuration) would still be its own.
		if d.z = h.cset.zone(); d.z == nil {
			d.route = routeServfail
		} else {
			d.route = routeClusterset
		}
		return d
	}
	if !h.noZone && inZone(lname, h.zoneName) {
		if delegated(h, lname) {
			return h.forwarded(d)
		}
		if d.z = z; d.z == nil {
			d.route = routeServfail
			return d
		}
		d.route = routeZone
		return d
	}
	reverse := !h.noZone && (inZone(lname, reverse4) || inZone(lname, reverse6))
	if reverse && h.scope != nil {
		// Outside the scope a reverse name is any other name.
		if d.ra = h.reverseAuthFor(lname); d.ra == nil {
			reverse = inScope(h.scope, lname)
		}
	}
	if reverse {
		if d.z = z; d.z == nil {
			d.route = routeServfail
			return d
		}
		if _, ok := d.z.snap.Lookup(lname); ok {
			d.route = routeZone
			return d
		}
	}
	if h.static != nil {
		if rrs, found := h.static.Lookup(lname, qtype); found {
			d.route, d.rrs = routeStatic, rrs
			return d
		}
	}
	if reverse {
		if d.ra == nil {
			d.ra = h.reverseAuthFor(lname)
		}
		if d.ra != nil {
			d.route = routeReverseAuth
			return d
		}
		if h.fwd == nil {
			d.route = routeZone
			return d
		}
	}
	// ANY for a name of no zone of ours is forwarded, as CoreDNS's forward
	// does without the any plugin (kubeadm's Corefile has none): the
	// upstream knows whether the name exists, and its RFC 8482 answer is
	// bounded like any other by the UDP reply size.
	return h.forwarded(d)
}

// forwarded is d forwarded, or refused without a forwarder.
func (h *Handler) forwarded(d decision) decision {
	d.route = routeForward
	if h.fwd == nil {
		d.route = routeRefused
	}
	return d
}

// delegated reports whether lname, a name of the cluster zone, is under
// a delegated zone.
func delegated(h *Handler, lname string) bool {
	if h.fwd == nil {
		return false
	}
	for _, z := range h.delegated {
		if z != h.zoneName && inZone(lname, z) {
			return true
		}
	}
	return false
}

// inScope says whether the reverse name lname is an address, or a network
// of addresses, inside one of scope.
func inScope(scope []netip.Prefix, lname string) bool {
	p, ok := store.ParseReverse(lname)
	return ok && v1alpha1.Within(scope, p)
}
