package store

import (
	"bytes"
	"cmp"
	"iter"
	"net/netip"
	"slices"
	"strings"
)

// The served endpoints of a Service: every address of a ready endpoint,
// or of any endpoint with PublishNotReadyAddresses, each named by its
// label under the Service's name. The build walks them (servedAddrs); a
// delta compares two sets of them (servedSet).

// servedAddr is one served address of an endpoint of a slice.
type servedAddr struct {
	slice *EndpointSlice
	ep    *Endpoint
	addr  netip.Addr // unmapped
}

// servedAddrs yields the served endpoint addresses of svc's slices sls, in
// their order: every address of a ready endpoint, or of any endpoint with
// PublishNotReadyAddresses.
func servedAddrs(svc *Service, sls []*EndpointSlice) iter.Seq[servedAddr] {
	return func(yield func(servedAddr) bool) {
		for _, sl := range sls {
			for i := range sl.Endpoints {
				ep := &sl.Endpoints[i]
				if !ep.Ready && !svc.PublishNotReadyAddresses {
					continue
				}
				for _, a := range ep.Addresses {
					if !yield(servedAddr{sl, ep, a.Unmap()}) {
						return
					}
				}
			}
		}
	}
}

// maxLabel is the longest DNS label.
const maxLabel = 63

// appendEndpointLabel appends the label of endpoint address a of ep to
// dst: its hostname, else (podNames) its pod name, else its dashed
// address, lowercase.
func appendEndpointLabel(dst []byte, ep Endpoint, a netip.Addr, podNames bool) []byte {
	switch {
	case ep.Hostname != "" && len(ep.Hostname) <= maxLabel:
		return appendLower(dst, ep.Hostname)
	case podNames && ep.PodName != "" && len(ep.PodName) <= maxLabel:
		return appendLower(dst, ep.PodName)
	}
	return appendEndpointDashedIP(dst, a)
}

// appendLower appends strings.ToLower(s) to dst, without a copy of s when
// it is ASCII.
func appendLower(dst []byte, s string) []byte {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return append(dst, strings.ToLower(s)...)
		}
	}
	for i := range len(s) {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// servedEP is one served endpoint address of a Service and its label, a
// range of its servedSet's text.
type servedEP struct {
	addr   netip.Addr
	lo, hi int32
}

// servedSet is the served endpoint addresses of a Service, sorted by
// address, each once.
type servedSet struct {
	eps  []servedEP
	text []byte
	// repeats says that an address was served more than once with the
	// same label (by two slices, or twice in one).
	repeats bool
}

func (set *servedSet) label(e servedEP) []byte { return set.text[e.lo:e.hi] }

// host is the endpoint name of e under the Service name base.
func (set *servedSet) host(e servedEP, base string) string {
	return string(set.label(e)) + "." + base
}

// deltaScratch is the lists a delta makes and drops, for the next one.
type deltaScratch struct {
	sets   [2]servedSet
	labels []servedEP
}

// trim drops the lists longer than keep, which a Service of thousands of
// endpoints made, as buildScratch.kept does.
func (sc *deltaScratch) trim(keep int) {
	for i := range sc.sets {
		if cap(sc.sets[i].eps) > keep {
			sc.sets[i] = servedSet{}
		}
	}
	if cap(sc.labels) > keep {
		sc.labels = nil
	}
}

// fill makes set the served endpoints of svc with slices sls, and reports
// whether each of its addresses and labels is its own, every label is
// one label and none is another address's dashed form (implicitAllowed). labels is scratch space; it returns it.
func (set *servedSet) fill(labels []servedEP, svc *Service, sls []*EndpointSlice, podNames bool) ([]servedEP, bool) {
	n := 0
	for _, sl := range sls {
		n += len(sl.Endpoints)
	}
	set.eps, set.text = slices.Grow(set.eps[:0], n), slices.Grow(set.text[:0], 16*n)
	named := false // a label other than the dashed address
	for sa := range servedAddrs(svc, sls) {
		lo := len(set.text)
		set.text = appendEndpointLabel(set.text, *sa.ep, sa.addr, podNames)
		explicit := sa.ep.Hostname != "" || (podNames && sa.ep.PodName != "")
		named = named || explicit
		if bytes.IndexByte(set.text[lo:], '.') >= 0 || (explicit && foreignDashed(set.text[lo:], sa.addr)) {
			return labels, false // see implicitAllowed
		}
		set.eps = append(set.eps, servedEP{addr: sa.addr, lo: int32(lo), hi: int32(len(set.text))})
	}
	slices.SortFunc(set.eps, func(a, b servedEP) int {
		return cmp.Or(a.addr.Compare(b.addr), bytes.Compare(set.label(a), set.label(b)))
	})
	n = len(set.eps)
	set.eps = slices.CompactFunc(set.eps, func(a, b servedEP) bool {
		return a.addr == b.addr && bytes.Equal(set.label(a), set.label(b))
	})
	set.repeats = len(set.eps) < n
	for i := 1; i < len(set.eps); i++ {
		if set.eps[i].addr == set.eps[i-1].addr {
			return labels, false
		}
	}
	if !named {
		return labels, true // the dashed addresses differ as the addresses do
	}
	labels = append(labels[:0], set.eps...)
	slices.SortFunc(labels, func(a, b servedEP) int { return bytes.Compare(set.label(a), set.label(b)) })
	for i := 1; i < len(labels); i++ {
		if bytes.Equal(set.label(labels[i]), set.label(labels[i-1])) {
			return labels, false
		}
	}
	return labels, true
}

// diffServed returns the endpoints of was that is has not, and those of is
// that was has not.
func diffServed(was, is *servedSet) (gone, came []servedEP) {
	i, j := 0, 0
	for i < len(was.eps) || j < len(is.eps) {
		c := 0
		switch {
		case i == len(was.eps):
			c = 1
		case j == len(is.eps):
			c = -1
		default:
			c = cmp.Or(was.eps[i].addr.Compare(is.eps[j].addr), bytes.Compare(was.label(was.eps[i]), is.label(is.eps[j])))
		}
		switch {
		case c < 0:
			gone = append(gone, was.eps[i])
			i++
		case c > 0:
			came = append(came, is.eps[j])
			j++
		default:
			i++
			j++
		}
	}
	return gone, came
}

// implicitAllowed reports whether svc's served endpoints (of sls) may
// leave their dashed names implicit: no hostname or pod name that names
// them is another address's dashed form.
func implicitAllowed(svc *Service, sls []*EndpointSlice, podNames bool) bool {
	var buf [maxLabel + 1]byte
	for sa := range servedAddrs(svc, sls) {
		ep := sa.ep
		if ep.Hostname == "" && (!podNames || ep.PodName == "") {
			continue
		}
		if foreignDashed(appendEndpointLabel(buf[:0], *ep, sa.addr, podNames), sa.addr) {
			return false
		}
	}
	return true
}
