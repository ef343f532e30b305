package topology

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// ZoneLabel is the Node label naming its topology zone.
const ZoneLabel = "topology.kubernetes.io/zone"

// DefaultOptionCode is the EDNS0 local option code carrying a Client, the
// one after autopath's. It is a copy of api/v1alpha1's, which this pure
// package does not import; test/apidefaults ties them.
const DefaultOptionCode = 65002

// Limits of the payload's parts: a label value and a DNS-1123 subdomain.
const (
	MaxZoneLength = 63
	MaxNodeLength = 253
)

// Client is the asking client's topology zone and node name ("" is
// unknown).
type Client struct {
	Zone, Node string
}

// Known reports whether anything about the client is known.
func (c Client) Known() bool { return c.Zone != "" || c.Node != "" }

// Encode returns the option payload for c: zone, 0x00, node. It does not
// check c; Decode does.
func Encode(c Client) []byte {
	b := make([]byte, 0, len(c.Zone)+1+len(c.Node))
	b = append(b, c.Zone...)
	b = append(b, 0)
	return append(b, c.Node...)
}

// ErrNoSeparator is Decode's error for a payload without the 0x00 byte.
var ErrNoSeparator = errors.New("topology: option has no 0x00 separator")

// Decode parses an option payload. The zone must be empty or a label value
// (at most 63 bytes), the node empty or a DNS-1123 subdomain (at most 253
// bytes); the error names the part that is not.
func Decode(b []byte) (Client, error) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return Client{}, ErrNoSeparator
	}
	zone, node := b[:i], b[i+1:]
	if err := checkZone(zone); err != nil {
		return Client{}, fmt.Errorf("topology: option zone %q: %w", zone, err)
	}
	if err := checkNode(node); err != nil {
		return Client{}, fmt.Errorf("topology: option node %q: %w", node, err)
	}
	return Client{Zone: string(zone), Node: string(node)}, nil
}

// Add sets the option code to c in m, replacing any option of that code.
// A message without an OPT gets one advertising dnsmsg.EDNSSize, as the
// queries carrying autopath's option do.
func Add(m *dns.Msg, code uint16, c Client) {
	opt := m.IsEdns0()
	if opt == nil {
		m.SetEdns0(dnsmsg.EDNSSize, false)
		opt = m.IsEdns0()
	}
	data := Encode(c)
	for _, o := range opt.Option {
		if l, ok := o.(*dns.EDNS0_LOCAL); ok && l.Code == code {
			l.Data = data
			return
		}
	}
	opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: code, Data: data})
}

// Take removes every option of code from m and returns the client the
// first one carries. ok is false without one or when its payload is
// malformed (Decode's error); the option is removed either way.
func Take(m *dns.Msg, code uint16) (c Client, ok bool) {
	opt := m.IsEdns0()
	if opt == nil {
		return Client{}, false
	}
	found, kept := false, opt.Option[:0]
	for _, o := range opt.Option {
		if o.Option() != code {
			kept = append(kept, o)
			continue
		}
		if found {
			continue
		}
		found = true
		if l, isLocal := o.(*dns.EDNS0_LOCAL); isLocal {
			if d, err := Decode(l.Data); err == nil {
				c, ok = d, true
			}
		}
	}
	clear(opt.Option[len(kept):])
	opt.Option = kept
	return c, ok
}

// checkZone accepts "" or a Kubernetes label value: at most 63 bytes of
// letters, digits, '-', '_' and '.', starting and ending alphanumeric.
func checkZone(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if len(b) > MaxZoneLength {
		return fmt.Errorf("longer than %d bytes", MaxZoneLength)
	}
	if !alnum(b[0]) || !alnum(b[len(b)-1]) {
		return errors.New("must start and end with a letter or digit")
	}
	for _, c := range b {
		if !alnum(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Errorf("character %q not allowed", c)
		}
	}
	return nil
}

// checkNode accepts "" or a DNS-1123 subdomain: at most 253 bytes of
// lowercase labels, each starting and ending alphanumeric.
func checkNode(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if len(b) > MaxNodeLength {
		return fmt.Errorf("longer than %d bytes", MaxNodeLength)
	}
	for _, label := range bytes.Split(b, []byte{'.'}) {
		if len(label) == 0 || len(label) > 63 {
			return errors.New("labels must be 1-63 bytes")
		}
		if !lowerAlnum(label[0]) || !lowerAlnum(label[len(label)-1]) {
			return errors.New("labels must start and end with a lowercase letter or digit")
		}
		for _, c := range label {
			if !lowerAlnum(c) && c != '-' {
				return fmt.Errorf("character %q not allowed", c)
			}
		}
	}
	return nil
}

func lowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

func alnum(c byte) bool { return lowerAlnum(c) || c >= 'A' && c <= 'Z' }

// The zone-scoped names. Their labels, as CoreDNS spells them:
// <topology zone>.<pin|prefer>._zone.<svc>.<ns>.svc.<cluster zone>.
const (
	scopeLabel    = "_zone"
	directivePin  = "pin"    // the topology zone's ready endpoints, NODATA if none
	directivePref = "prefer" // the topology zone's ready endpoints, else all
)

// scopeMark is how a zone-scoped name's _zone label reads inside it.
const scopeMark = "." + scopeLabel + "."

// Scoped is a parsed zone-scoped name.
type Scoped struct {
	Zone   string // the topology zone, lowercase; it may hold dots, as a label value may
	Prefer bool   // prefer: all endpoints when the zone has none (pin: NODATA)
	Base   string // the Service's name, <svc>.<ns>.svc.<cluster zone>.
}

// MaybeScoped reports whether the lowercase name lname may be a
// zone-scoped name: it holds a _zone label.
func MaybeScoped(lname string) bool { return strings.Contains(lname, scopeMark) }

// ParseScoped parses lname, a lowercase name of the cluster zone
// clusterZone (both with the trailing dot), as a zone-scoped name.
func ParseScoped(lname, clusterZone string) (Scoped, bool) {
	if !strings.Contains(lname, scopeMark) {
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
