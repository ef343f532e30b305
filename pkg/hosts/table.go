package hosts

import (
	"errors"
	"fmt"
	"iter"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// maxTTL is the largest TTL a record may carry (RFC 2181, section 8).
const maxTTL = 1<<31 - 1

// Override gives a name its addresses whatever the hosts file says: the
// file's records of that name are not served (nor the PTR records the file
// makes for it), the override's are.
type Override struct {
	// Name is a host name; it is lowercased and made fully qualified.
	Name string
	// Addresses are the name's IPv4 and IPv6 addresses: at least one, no
	// duplicates, no IPv6 zones. An IPv4-mapped IPv6 address is its IPv4
	// address, as in the file.
	Addresses []netip.Addr
	// TTL of the name's records (and of their PTR records), in whole
	// seconds; 0 is Config.TTL.
	TTL time.Duration
}

// Config is what a Table is built with besides the hosts file.
type Config struct {
	// TTL of every record, in whole seconds, at most 2147483647 s;
	// 0 is DefaultTTL.
	TTL time.Duration
	// NoReverse leaves out the PTR records (CoreDNS's no_reverse).
	NoReverse bool
	// Overrides win over the file for their names.
	Overrides []Override
}

// compiled is a validated Config.
type compiled struct {
	ttl       uint32
	noReverse bool
	overrides []compiledOverride
	n         int // addresses of all overrides
}

type compiledOverride struct {
	name  string
	addrs []netip.Addr
	ttl   uint32
}

// Validate reports every problem of c, each naming its field:
// `overrides[2].name: "a..b": empty label`.
func (c Config) Validate() error {
	_, err := c.compile()
	return err
}

func (c Config) compile() (compiled, error) {
	var errs []error
	out := compiled{noReverse: c.NoReverse, ttl: uint32(DefaultTTL / time.Second)}
	if c.TTL != 0 {
		ttl, err := seconds(c.TTL)
		if err != nil {
			errs = append(errs, fmt.Errorf("ttl: %w", err))
		} else {
			out.ttl = ttl
		}
	}
	names := map[string]int{}
	for i, o := range c.Overrides {
		field := fmt.Sprintf("overrides[%d]", i)
		co := compiledOverride{ttl: out.ttl}
		name, err := normalizeName(o.Name)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s.name: %q: %w", field, o.Name, err))
		case hasIndex(names, name):
			errs = append(errs, fmt.Errorf("%s.name: %q: the name of overrides[%d] too", field, o.Name, names[name]))
		default:
			names[name] = i
			co.name = name
		}
		if len(o.Addresses) == 0 {
			errs = append(errs, fmt.Errorf("%s.addresses: at least one address is required", field))
		}
		seen := map[netip.Addr]int{}
		for j, a := range o.Addresses {
			f := fmt.Sprintf("%s.addresses[%d]", field, j)
			switch {
			case !a.IsValid():
				errs = append(errs, fmt.Errorf("%s: not an IP address", f))
				continue
			case a.Zone() != "":
				errs = append(errs, fmt.Errorf("%s: %q: an address with a zone is not allowed", f, a))
				continue
			}
			a = a.Unmap()
			if k, dup := seen[a]; dup {
				errs = append(errs, fmt.Errorf("%s: %q: the same as addresses[%d]", f, a, k))
				continue
			}
			seen[a] = j
			co.addrs = append(co.addrs, a)
		}
		out.n += len(co.addrs)
		if o.TTL != 0 {
			ttl, err := seconds(o.TTL)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.ttl: %w", field, err))
			} else {
				co.ttl = ttl
			}
		}
		out.overrides = append(out.overrides, co)
	}
	if out.n > MaxEntries {
		errs = append(errs, fmt.Errorf("overrides: %d addresses: %w", out.n, ErrTooManyEntries))
	}
	if err := errors.Join(errs...); err != nil {
		return compiled{}, err
	}
	return out, nil
}

func hasIndex(m map[string]int, k string) bool {
	_, ok := m[k]
	return ok
}

// seconds checks a TTL and returns it in seconds.
func seconds(d time.Duration) (uint32, error) {
	switch {
	case d < 0:
		return 0, fmt.Errorf("%v: must not be negative", d)
	case d%time.Second != 0:
		return 0, fmt.Errorf("%v: must be a whole number of seconds", d)
	case d > maxTTL*time.Second:
		return 0, fmt.Errorf("%v: must be at most %ds", d, maxTTL)
	}
	return uint32(d / time.Second), nil
}

// Table is an immutable set of static records, ready to answer. It is safe
// for concurrent use.
type Table struct {
	names   map[string]*node
	entries int // forward records
}

// node is the records of one owner name, prebuilt; every slice has its
// capacity equal to its length, so that an append by a caller copies.
type node struct {
	a, aaaa, ptr, all []dns.RR
}

// NewTable builds the table of cfg alone, without a hosts file: the
// overrides and their PTR records.
func NewTable(cfg Config) (*Table, error) {
	c, err := cfg.compile()
	if err != nil {
		return nil, err
	}
	return build(parsed{}, c)
}

// build makes the table of a parsed file and a compiled Config.
func build(p parsed, c compiled) (*Table, error) {
	over := make(map[string]bool, len(c.overrides))
	for _, o := range c.overrides {
		over[o.name] = true
	}
	n := c.n
	for _, pr := range p.pairs {
		if !over[pr.name] {
			n++
		}
	}
	if n > MaxEntries {
		return nil, fmt.Errorf("%d entries with the overrides: %w", n, ErrTooManyEntries)
	}
	t := &Table{names: make(map[string]*node, n)}
	get := func(name string) *node {
		nd := t.names[name]
		if nd == nil {
			nd = &node{}
			t.names[name] = nd
		}
		return nd
	}
	add := func(a netip.Addr, name string, ttl uint32) {
		nd := get(name)
		hdr := dns.RR_Header{Name: name, Class: dns.ClassINET, Ttl: ttl}
		if a.Is4() {
			hdr.Rrtype = dns.TypeA
			nd.a = append(nd.a, &dns.A{Hdr: hdr, A: net.IP(a.AsSlice())})
		} else {
			hdr.Rrtype = dns.TypeAAAA
			nd.aaaa = append(nd.aaaa, &dns.AAAA{Hdr: hdr, AAAA: net.IP(a.AsSlice())})
		}
		t.entries++
		// No PTR for 0.0.0.0 and ::, the "blocked" address of ad-blocking
		// hosts files: its reverse name would list every blocked name.
		if c.noReverse || a.IsUnspecified() {
			return
		}
		rev, err := dns.ReverseAddr(a.String())
		if err != nil {
			return // cannot happen for a valid address
		}
		rn := get(rev)
		rn.ptr = append(rn.ptr, &dns.PTR{Hdr: dns.RR_Header{Name: rev, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl}, Ptr: name})
	}
	for _, pr := range p.pairs {
		if !over[pr.name] {
			add(pr.addr, pr.name, c.ttl)
		}
	}
	for _, o := range c.overrides {
		for _, a := range o.addrs {
			add(a, o.name, o.ttl)
		}
	}
	for _, nd := range t.names {
		nd.all = make([]dns.RR, 0, len(nd.a)+len(nd.aaaa)+len(nd.ptr))
		nd.all = append(append(append(nd.all, nd.a...), nd.aaaa...), nd.ptr...)
		nd.a, nd.aaaa, nd.ptr = clip(nd.a), clip(nd.aaaa), clip(nd.ptr)
	}
	return t, nil
}

func clip(rrs []dns.RR) []dns.RR { return rrs[:len(rrs):len(rrs)] }

// Lookup returns the records of name (lowercase, fully qualified) of type
// qtype: A for its IPv4 addresses, AAAA for its IPv6 addresses, PTR for a
// reverse name (in-addr.arpa, ip6.arpa) of an address, and every record of
// the name for ANY. found reports whether the name has records of any type,
// so that a name with only A records asked for AAAA is found with no
// records (NODATA). It is two map lookups, without allocating.
//
// The records and the slice are the table's: callers must not modify them
// (copy a record, dns.Copy, before changing its owner or TTL). The slice's
// capacity is its length, so appending to it copies.
func (t *Table) Lookup(name string, qtype uint16) (rrs []dns.RR, found bool) {
	nd := t.names[name]
	if nd == nil {
		return nil, false
	}
	switch qtype {
	case dns.TypeA:
		return nd.a, true
	case dns.TypeAAAA:
		return nd.aaaa, true
	case dns.TypePTR:
		return nd.ptr, true
	case dns.TypeANY:
		return nd.all, true
	}
	return nil, true
}

// Names are the owner names the table answers (lowercase, fully
// qualified): the host names and the reverse names of their addresses, in
// no order.
func (t *Table) Names() iter.Seq[string] {
	return func(yield func(string) bool) {
		for n := range t.names {
			if !yield(n) {
				return
			}
		}
	}
}

// Len is the number of (address, name) entries the table serves, overrides
// included.
func (t *Table) Len() int { return t.entries }
