package topology

import (
	"bytes"
	"strings"
)

// The labels of CoreDNS's zone-scoped names:
// <topology zone>.<pin|prefer>._zone.<svc>.<ns>.svc.<cluster zone>.
const (
	scopeLabel    = "_zone"
	directivePin  = "pin"    // the topology zone's ready endpoints, NODATA if none
	directivePref = "prefer" // the topology zone's ready endpoints, else all
)

// scopeMark is how a zone-scoped name's _zone label reads inside it.
var scopeMark = []byte("." + scopeLabel + ".")

// Scoped is a parsed zone-scoped name.
type Scoped struct {
	Zone   string // the topology zone, lowercase; it may hold dots, as a label value may
	Prefer bool   // prefer: all endpoints when the zone has none (pin: NODATA)
	Base   string // the Service's name, <svc>.<ns>.svc.<cluster zone>.
}

// MaybeScoped reports whether the lowercase name lname may be a
// zone-scoped name: it holds a _zone label.
func MaybeScoped(lname []byte) bool { return bytes.Contains(lname, scopeMark) }

// ParseScoped parses lname, a lowercase name of the cluster zone
// clusterZone (both with the trailing dot), as a zone-scoped name.
func ParseScoped(lname, clusterZone string) (Scoped, bool) {
	if !strings.Contains(lname, string(scopeMark)) {
		return Scoped{}, false
	}
	rest, ok := strings.CutSuffix(lname, "."+clusterZone)
	if !ok {
		return Scoped{}, false
	}
	labels := strings.Split(rest, ".")
	n := len(labels)
	// At least one topology zone label, the directive, _zone, svc, ns, svc.
	if n < 6 || labels[n-1] != "svc" || labels[n-4] != scopeLabel {
		return Scoped{}, false
	}
	s := Scoped{Zone: strings.Join(labels[:n-5], "."), Base: labels[n-3] + "." + labels[n-2] + ".svc." + clusterZone}
	switch labels[n-5] {
	case directivePin:
	case directivePref:
		s.Prefer = true
	default:
		return Scoped{}, false
	}
	return s, s.Zone != "" && labels[n-3] != "" && labels[n-2] != ""
}
