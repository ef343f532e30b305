package clusterdns

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// zone is the view of one store.Snapshot the handler answers from: the
// snapshot and the zone SOA. Records are built from the snapshot's nodes
// when a reply is not cached (see replyCache), so the server holds the
// record data once.
type zone struct {
	snap *store.Snapshot
	name string // lowercase, trailing dot
	ttl  uint32
	soa  []dns.RR // the zone SOA, for the authority section of negatives
	// epoch tells the reply cache which view a reply was made from.
	epoch uint64
}

// nsName is the name server of the zone in its SOA and NS records, as
// CoreDNS.
func nsName(zone string) string { return "ns.dns." + zone }

func soaRR(owner, zoneName string, ttl, serial uint32) *dns.SOA {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: owner, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns:      nsName(zoneName),
		Mbox:    "hostmaster." + zoneName,
		Serial:  serial,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  ttl,
	}
}

func addrRR(owner string, a netip.Addr, ttl uint32) dns.RR {
	if a.Is4() {
		b := a.As4()
		return &dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.IP(b[:])}
	}
	b := a.As16()
	return &dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: net.IP(b[:])}
}

// appendA appends A records for addrs.
func appendA(rrs []dns.RR, owner string, addrs []netip.Addr, ttl uint32) []dns.RR {
	return appendAddrs(rrs, addrs, net.IPv4len, func(r *dns.A, ip net.IP) {
		*r = dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: ip}
	})
}

// appendAAAA is appendA for IPv6.
func appendAAAA(rrs []dns.RR, owner string, addrs []netip.Addr, ttl uint32) []dns.RR {
	return appendAddrs(rrs, addrs, net.IPv6len, func(r *dns.AAAA, ip net.IP) {
		*r = dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: ip}
	})
}

// appendAddrs appends a record R for each address of n bytes, filled by
// set, with one allocation for the records and one for the addresses.
func appendAddrs[R any, P interface {
	*R
	dns.RR
}](rrs []dns.RR, addrs []netip.Addr, n int, set func(P, net.IP)) []dns.RR {
	if len(addrs) == 0 {
		return rrs
	}
	recs := make([]R, len(addrs))
	ips := make([]byte, n*len(addrs))
	for i, a := range addrs {
		b := a.As16() // an IPv4 address is in the last 4 bytes
		ip := ips[n*i : n*i+n : n*i+n]
		copy(ip, b[16-n:])
		set(&recs[i], ip)
		rrs = append(rrs, P(&recs[i]))
	}
	return rrs
}

func appendSRV(rrs []dns.RR, owner string, srvs []store.SRV, ttl uint32) []dns.RR {
	if len(srvs) == 0 {
		return rrs
	}
	recs := make([]dns.SRV, len(srvs))
	for i, s := range srvs {
		recs[i] = dns.SRV{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: ttl},
			Priority: s.Priority, Weight: s.Weight, Port: s.Port, Target: s.Target}
		rrs = append(rrs, &recs[i])
	}
	return rrs
}

func appendPTR(rrs []dns.RR, owner string, ptrs []string, ttl uint32) []dns.RR {
	for _, p := range ptrs {
		rrs = append(rrs, &dns.PTR{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl}, Ptr: p})
	}
	return rrs
}

func appendTXT(rrs []dns.RR, owner string, txt []string, ttl uint32) []dns.RR {
	if len(txt) == 0 {
		return rrs
	}
	return append(rrs, &dns.TXT{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: ttl}, Txt: txt})
}

func cnameRR(owner, target string, ttl uint32) dns.RR {
	return &dns.CNAME{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: ttl}, Target: target}
}

// records builds the records of type t of node n, owned by owner (the
// question name as asked, so its case is echoed). ANY is answered by
// Handler.answer (RFC 8482), not here.
func (z *zone) records(owner, lname string, n *store.Node, t uint16) []dns.RR {
	switch t {
	case dns.TypeSOA, dns.TypeNS:
		if lname == z.name {
			return z.apexRecords(owner, z.name, z.soa[0].(*dns.SOA), t)
		}
	case dns.TypeA:
		return appendA(nil, owner, n.A(), n.TTL)
	case dns.TypeAAAA:
		return appendAAAA(nil, owner, n.AAAA(), n.TTL)
	case dns.TypeSRV:
		return appendSRV(nil, owner, n.SRV(), n.TTL)
	case dns.TypePTR:
		return appendPTR(nil, owner, n.PTR(), n.TTL)
	case dns.TypeTXT:
		return appendTXT(nil, owner, n.TXT(), n.TTL)
	case dns.TypeCNAME:
		if n.CNAME() != "" {
			return []dns.RR{cnameRR(owner, n.CNAME(), n.TTL)}
		}
	}
	return nil
}

// apexRecords is the SOA (a copy of soa) or the NS record of a zone apex.
func (z *zone) apexRecords(owner, zoneName string, soa *dns.SOA, t uint16) []dns.RR {
	if t == dns.TypeSOA {
		c := *soa
		c.Hdr.Name = owner
		return []dns.RR{&c}
	}
	return []dns.RR{&dns.NS{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: z.ttl}, Ns: nsName(z.name)}}
}

// srvExtra is the additional section of an SRV answer: the addresses of the
// targets, once each.
func (z *zone) srvExtra(srvs []store.SRV) []dns.RR {
	var extra []dns.RR
	for i, s := range srvs {
		dup := false
		for _, p := range srvs[:i] {
			if p.Target == s.Target {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		if tn, ok := z.snap.Lookup(s.Target); ok {
			extra = appendA(extra, s.Target, tn.A(), tn.TTL)
			extra = appendAAAA(extra, s.Target, tn.AAAA(), tn.TTL)
		}
	}
	return extra
}

// newZone is the zone view of snap, of epoch 1 (the handler numbers the
// views it makes).
func newZone(snap *store.Snapshot) *zone {
	z := &zone{snap: snap, name: snap.Zone, ttl: snap.Options.TTL, epoch: 1}
	z.soa = []dns.RR{soaRR(z.name, z.name, z.ttl, snap.Serial)}
	return z
}

// views makes the zone view of a Records' current snapshot, once per
// snapshot.
type views struct {
	mu  sync.Mutex // serialises moving on to a new snapshot
	cur atomic.Pointer[zone]
}

// current is the view of records' current snapshot, nil before the first.
// A new view is passed to made (when set) with the one before it (nil at
// first), under the lock, before any query sees it.
func (v *views) current(records Records, made func(prev, z *zone)) *zone {
	snap := records.Snapshot()
	if snap == nil {
		return nil
	}
	if z := v.cur.Load(); z != nil && z.snap == snap {
		return z
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	prev := v.cur.Load()
	if prev != nil && prev.snap == snap {
		return prev
	}
	z := newZone(snap)
	if made != nil {
		made(prev, z)
	}
	v.cur.Store(z)
	return z
}

func clip(rrs []dns.RR) []dns.RR { return rrs[:len(rrs):len(rrs)] }

// inZone reports whether the lowercase fqdn name (text or bytes) is the
// zone or below it.
func inZone[S ~string | ~[]byte](name S, zone string) bool {
	return string(name) == zone || (len(name) > len(zone) && name[len(name)-len(zone)-1] == '.' &&
		string(name[len(name)-len(zone):]) == zone)
}

// reverse zones answered from the store (names not found are forwarded, as
// CoreDNS's default "kubernetes cluster.local in-addr.arpa ip6.arpa {
// fallthrough in-addr.arpa ip6.arpa }").
const (
	reverse4 = "in-addr.arpa."
	reverse6 = "ip6.arpa."
)

func reverseZone(name string) string {
	switch {
	case inZone(name, reverse4):
		return reverse4
	case inZone(name, reverse6):
		return reverse6
	}
	return ""
}

// reverseAuthFor returns the authoritative reverse zone a lowercase reverse
// name belongs to: a name inside one of the WithReverseZones prefixes, or
// between the prefix and its zone's apex. nil when there is none.
func (h *Handler) reverseAuthFor(lname string) *reverseAuth {
	if len(h.reverse) == 0 {
		return nil
	}
	p, ok := store.ParseReverse(lname)
	if !ok {
		// Under a zone of ours but not an address (e.g. a letter label):
		// the name cannot exist.
		for i := range h.reverse {
			if inZone(lname, h.reverse[i].zone) {
				return &h.reverse[i]
			}
		}
		return nil
	}
	for i := range h.reverse {
		ra := &h.reverse[i]
		if ra.prefix.Addr().Is4() != p.Addr().Is4() || p.Bits() < ra.bits {
			continue
		}
		if p.Bits() >= ra.prefix.Bits() && ra.prefix.Contains(p.Addr()) {
			return ra
		}
		if p.Bits() < ra.prefix.Bits() && p.Contains(ra.prefix.Addr()) {
			return ra
		}
	}
	return nil
}

// reverseAnswer answers a reverse name of the authoritative zone ra that the
// snapshot does not know: the apex's SOA and NS, NOERROR with no answer for
// the names that lead to the prefix or to addresses the snapshot has,
// NXDOMAIN otherwise; negatives carry the zone's SOA.
func (z *zone) reverseAnswer(ra *reverseAuth, qtype uint16, owner, lname string) Result {
	soa := soaRR(ra.zone, z.name, z.ttl, z.snap.Serial)
	neg := []dns.RR{soa}
	p, ok := store.ParseReverse(lname)
	exists := ok && (p.Bits() < ra.prefix.Bits() || z.hasAddrIn(p))
	if !exists {
		return Result{Rcode: dns.RcodeNameError, Ns: neg, Authoritative: true}
	}
	var ans []dns.RR
	switch {
	case qtype == dns.TypeANY:
		ans = []dns.RR{anyRR(owner, "", z.ttl)}
	case lname == ra.zone && (qtype == dns.TypeSOA || qtype == dns.TypeNS):
		ans = z.apexRecords(owner, ra.zone, soa, qtype)
	}
	if len(ans) == 0 {
		return Result{Rcode: dns.RcodeSuccess, Ns: neg, Authoritative: true}
	}
	return Result{Rcode: dns.RcodeSuccess, Answer: ans, Authoritative: true}
}

// hasAddrIn reports whether an address with a PTR name in the snapshot lies
// in p (p is then an empty non-terminal, or the PTR name itself).
func (z *zone) hasAddrIn(p netip.Prefix) bool { return z.snap.HasPTRIn(p) }

// anyRR is the minimal answer to ANY for an existing name (RFC 8482): the
// CNAME of an alias, else a synthesized HINFO "RFC8482" "".
func anyRR(owner, cname string, ttl uint32) dns.RR {
	if cname != "" {
		return cnameRR(owner, cname, ttl)
	}
	return &dns.HINFO{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeHINFO, Class: dns.ClassINET, Ttl: ttl}, Cpu: "RFC8482"}
}

// staticAnswer answers from static records: authoritative, never cached,
// the owners in the question's case.
func staticAnswer(qtype uint16, owner, lname string, rrs []dns.RR) Result {
	r := Result{Rcode: dns.RcodeSuccess, Authoritative: true, volatile: true}
	if qtype == dns.TypeANY {
		var ttl uint32
		if len(rrs) > 0 {
			ttl = rrs[0].Header().Ttl
		}
		r.Answer = []dns.RR{anyRR(owner, "", ttl)}
		return r
	}
	if owner == lname {
		r.Answer = clip(rrs)
		return r
	}
	r.Answer = make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		if rr.Header().Name == lname {
			rr = dns.Copy(rr)
			rr.Header().Name = owner
		}
		r.Answer[i] = rr
	}
	return r
}

func (z *zone) negative(name string) []dns.RR {
	if rz := reverseZone(name); rz != "" {
		return []dns.RR{soaRR(rz, z.name, z.ttl, z.snap.Serial)}
	}
	return z.soa
}

// answer answers a from the zone: its name as asked (its case is echoed,
// with its dot), its lowercase form, and the client's variant of it.
// depth counts the CNAMEs followed to get here.
func (h *Handler) answer(ctx context.Context, z *zone, a question, depth int) Result {
	qtype, owner, lname := a.Qtype, a.Name, a.lname
	n, ok := z.lookup(lname, a.variant)
	if !ok {
		if r, ok := h.insecurePod(z, qtype, owner, lname); ok {
			return r
		}
		if r, ok := z.zoneScopedAnswer(qtype, owner, lname); ok {
			return r
		}
		return Result{Rcode: dns.RcodeNameError, Ns: z.negative(lname), Authoritative: true}
	}
	if qtype == dns.TypeANY {
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{anyRR(owner, n.CNAME(), n.TTL)}, Authoritative: true}
	}
	if n.CNAME() != "" && qtype != dns.TypeCNAME {
		t := question{Question: dns.Question{Name: n.CNAME(), Qtype: qtype, Qclass: dns.ClassINET}, lname: n.CNAME(), from: a.from}
		return h.chase(ctx, z, t, cnameRR(owner, n.CNAME(), n.TTL), depth)
	}
	ans := z.records(owner, lname, n, qtype)
	if len(ans) == 0 {
		return Result{Rcode: dns.RcodeSuccess, Ns: z.negative(lname), Authoritative: true}
	}
	var extra []dns.RR
	var deps []string
	if qtype == dns.TypeSRV {
		extra = z.srvExtra(n.SRV())
		for _, s := range n.SRV() {
			deps = append(deps, s.Target)
		}
	}
	return Result{Rcode: dns.RcodeSuccess, Answer: clip(ans), Extra: clip(extra), Authoritative: true, deps: deps}
}

// chase answers for an ExternalName: the CNAME, then the records of its
// target t (a lowercase name, no variant), followed inside the zone or
// asked upstream.
func (h *Handler) chase(ctx context.Context, z *zone, t question, cname dns.RR, depth int) Result {
	target := t.lname
	if inZone(target, z.name) && !delegated(h, target) {
		if depth >= maxChase {
			return Result{Rcode: dns.RcodeServerFailure}
		}
		r := h.answer(ctx, z, t, depth+1)
		if r.Rcode == dns.RcodeServerFailure {
			return r
		}
		r.Answer = append([]dns.RR{cname}, r.Answer...)
		r.deps = append(r.deps, target)
		return r
	}
	if h.fwd == nil {
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{cname}, Authoritative: true}
	}
	r := h.forwardQuestion(ctx, t)
	if r.Rcode == dns.RcodeServerFailure || r.Rcode == dns.RcodeRefused {
		// The client can still chase the CNAME itself.
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{cname}, Authoritative: true, Forwarded: true}
	}
	r.Answer = append([]dns.RR{cname}, r.Answer...)
	r.Forwarded = true
	return r
}

// insecurePod answers <dashed-ip>.<ns>.pod.<zone> in the insecure pod mode:
// any well-formed IP in an exposed namespace.
func (h *Handler) insecurePod(z *zone, qtype uint16, owner, lname string) (Result, bool) {
	if z.snap.Options.Pods != store.PodsInsecure {
		return Result{}, false
	}
	suffix := ".pod." + z.name
	if !strings.HasSuffix(lname, suffix) {
		return Result{}, false
	}
	rest := lname[:len(lname)-len(suffix)]
	i := strings.IndexByte(rest, '.')
	if i <= 0 || strings.IndexByte(rest[i+1:], '.') >= 0 {
		return Result{}, false
	}
	if !z.snap.NamespaceExposed(rest[i+1:]) {
		return Result{}, false
	}
	ip, ok := store.ParseDashedIP(rest[:i])
	if !ok {
		return Result{}, false
	}
	if qtype == dns.TypeANY {
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{anyRR(owner, "", z.ttl)}, Authoritative: true}, true
	}
	if (qtype == dns.TypeA && ip.Is4()) || (qtype == dns.TypeAAAA && ip.Is6()) {
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{addrRR(owner, ip, z.ttl)}, Authoritative: true}, true
	}
	return Result{Rcode: dns.RcodeSuccess, Ns: z.soa, Authoritative: true}, true
}

// fill puts a Result into a reply.
func fill(m *dns.Msg, r Result) {
	m.Rcode = r.Rcode
	m.Authoritative = r.Authoritative
	m.Answer, m.Ns, m.Extra = r.Answer, r.Ns, r.Extra
}

// lookup is the node of lname: its variant v when it has it, else the
// name's own. A CNAME's target is answered with its own node (no
// variant): the reply is cached under the question.
func (z *zone) lookup(lname string, v store.Variant) (*store.Node, bool) {
	if v != "" {
		if n, ok := z.snap.LookupVariant(lname, v); ok {
			return n, true
		}
	}
	return z.snap.Lookup(lname)
}

// variantFor is the variant of lname, a name of z, for client c.
func (z *zone) variantFor(lname string, c topology.Client) store.Variant {
	if !c.Known() || !z.snap.HasVariants(lname) {
		return ""
	}
	return z.snap.VariantFor(lname, c.Zone, c.Node)
}

// zoneScopedAnswer answers lname when it is a zone-scoped name of a
// Service with topology zone variants, as CoreDNS does: A, AAAA and SRV
// (with the targets' addresses) of the topology zone's ready endpoints;
// with prefer, of every endpoint when the topology zone has none; NODATA
// for other types and for a pin with none. ok is false for any other
// name (the caller answers NXDOMAIN): our store keeps topology zones only
// for headless Services with a traffic distribution.
func (z *zone) zoneScopedAnswer(qtype uint16, owner, lname string) (Result, bool) {
	if z.snap.Counts.Variants == 0 {
		return Result{}, false
	}
	zs, ok := topology.ParseScoped(lname, z.name)
	if !ok || !z.snap.HasVariants(zs.Base) {
		return Result{}, false
	}
	n, found := z.snap.LookupVariant(zs.Base, store.TopologyZoneVariant(zs.Zone))
	if !found && zs.Prefer {
		n, found = z.snap.Lookup(zs.Base)
	}
	nodata := Result{Rcode: dns.RcodeSuccess, Ns: z.negative(lname), Authoritative: true, deps: []string{zs.Base}}
	if !found {
		return nodata, true
	}
	var ans []dns.RR
	switch qtype {
	case dns.TypeA, dns.TypeAAAA, dns.TypeSRV:
		ans = z.records(owner, zs.Base, n, qtype)
	}
	if len(ans) == 0 {
		return nodata, true
	}
	r := Result{Rcode: dns.RcodeSuccess, Answer: clip(ans), Authoritative: true, deps: []string{zs.Base}}
	if qtype == dns.TypeSRV {
		r.Extra = clip(z.srvExtra(n.SRV()))
		for _, s := range n.SRV() {
			r.deps = append(r.deps, s.Target)
		}
	}
	return r, true
}
