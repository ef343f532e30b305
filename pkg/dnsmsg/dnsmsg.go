package dnsmsg

import "github.com/miekg/dns"

// EDNSSize is the EDNS0 UDP payload size advertised in replies and in
// queries sent upstream: 1232 bytes, the DNS Flag Day 2020 value. It is the
// IPv6 minimum MTU (1280) less the IPv6 and UDP headers (40 + 8 bytes), so a
// UDP message of that size is not fragmented on any IPv6 path nor on common
// IPv4 ones; a larger reply is truncated (TC) and retried over TCP instead
// of relying on IP fragments, which get dropped by firewalls and are open to
// spoofing.
const EDNSSize = 1232

// Check returns the query's OPT (nil without EDNS0) and the rcode of a query
// that is answered without looking at its question: FORMERR without exactly
// one question, NOTIMP for opcodes other than QUERY, BADVERS for EDNS
// versions other than 0. The rcode is dns.RcodeSuccess for a query to
// answer.
func Check(req *dns.Msg) (opt *dns.OPT, rcode int) {
	switch {
	case len(req.Question) != 1:
		return nil, dns.RcodeFormatError
	case req.Opcode != dns.OpcodeQuery:
		return nil, dns.RcodeNotImplemented
	}
	opt = req.IsEdns0()
	if opt != nil && opt.Version() != 0 {
		return opt, dns.RcodeBadVers
	}
	return opt, dns.RcodeSuccess
}

// ReplySize is the largest reply sent to a client that sent opt (its
// query's OPT, nil without EDNS0): 512 bytes without EDNS0; with it, its
// EDNS0 UDP size but never more than EDNSSize (nor less than 512); 64 KiB
// over TCP. A client's claim of a larger buffer is not followed over UDP
// (RFC 6891 section 6.2.5 lets a responder use the smaller of the two
// sizes): a bigger datagram would be fragmented, or over 65,507 bytes not
// sent at all, so such a reply is truncated (TC) and the client retries
// over TCP.
func ReplySize(opt *dns.OPT, tcp bool) int {
	if opt == nil {
		return replySize(false, 0, tcp)
	}
	return replySize(true, opt.UDPSize(), tcp)
}

// replySize is ReplySize's rule, for a query with or without EDNS0 (edns)
// advertising size.
func replySize(edns bool, size uint16, tcp bool) int {
	switch {
	case tcp:
		return dns.MaxMsgSize
	case edns:
		return min(EDNSSize, max(dns.MinMsgSize, int(size)))
	}
	return dns.MinMsgSize
}

// Shape is what makes Finish's UDP replies to the same answer and question
// as sent differ besides the ID, the RD and CD bits and the TTLs: whether
// the query has an OPT (the reply then has one) and ReplySize. A cache of
// finished replies keys them by it (pkg/dnscache Keep). opt is the query's
// OPT, nil without EDNS0.
func Shape(opt *dns.OPT) uint32 {
	if opt == nil {
		return shape(false, 0)
	}
	return shape(true, opt.UDPSize())
}

// shape is Shape's rule, for a query with or without EDNS0 (edns)
// advertising size.
func shape(edns bool, size uint16) uint32 {
	s := uint32(replySize(edns, size, false))
	if edns {
		s |= 1 << 16
	}
	return s
}

// Finish completes the reply m to req: an OPT advertising EDNSSize, with the
// client's DO bit, when the client sent one (BADVERS needs it to carry its
// extended rcode), then truncation to ReplySize with TC set when records
// were left out. Every reply is name-compressed, over TCP too: miekg's
// Truncate leaves a reply that fits uncompressed, and a large headless
// answer then costs three times the bytes. It returns m.
func Finish(req, m *dns.Msg, tcp bool) *dns.Msg {
	opt := req.IsEdns0()
	if opt != nil {
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.SetUDPSize(EDNSSize)
		o.SetDo(opt.Do())
		m.Extra = append(m.Extra, o)
	}
	m.Truncate(ReplySize(opt, tcp))
	m.Compress = true
	return m
}

// Query returns a recursive query for q, with a fresh ID and an OPT
// advertising EDNSSize with the DO bit do.
func Query(q dns.Question, do bool) *dns.Msg {
	m := new(dns.Msg)
	m.Id = dns.Id()
	m.RecursionDesired = true
	m.Question = []dns.Question{q}
	m.SetEdns0(EDNSSize, do)
	return m
}

// WithoutOPT returns rrs without its OPT records: an upstream reply's OPT
// (and any option it echoes) never reaches the client, which gets the OPT
// of Finish instead. It returns rrs itself when there is none.
func WithoutOPT(rrs []dns.RR) []dns.RR {
	for i, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			out := make([]dns.RR, 0, len(rrs)-1)
			out = append(out, rrs[:i]...)
			for _, rr := range rrs[i+1:] {
				if rr.Header().Rrtype != dns.TypeOPT {
					out = append(out, rr)
				}
			}
			return out
		}
	}
	return rrs
}
