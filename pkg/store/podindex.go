package store

import (
	"maps"
	"net/netip"
	"slices"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
)

// A pod IP is known by the pods that claim it. Their namespace answers
// PodNamespace (pods verified), and their node places a client by its
// source address (ClientTopology), through the node's topology zone
// (topology.go). One index counts each pod's claim once, with both, so
// the two answers always follow the same pods. A reused IP the watch has
// not caught up with has two claimers; an answer they disagree on is
// unknown. A pod claims its IPs through its unit's contribution, and a
// Publish edits the Snapshot's index at the IPs whose claims changed.

// podClaim is one pod's claim on an IP: its namespace (lowercase; "" when
// it makes no pod record: pods not verified, namespace not exposed) and
// its node ("" when not scheduled).
type podClaim struct {
	ip       netip.Addr
	ns, node string
}

// podFacts is what a Snapshot knows of a pod IP: the namespace and the
// node its claimers agree on, "" for what they do not say or disagree on.
type podFacts struct{ ns, node string }

// claimCount counts the pods claiming an IP with one namespace and node.
type claimCount struct {
	ns, node string
	n        int32
}

// podIndex counts the claims on each pod IP. An IP nearly always has one
// claim (one pod, or the pods of one namespace and node): it is held in
// first, and only the others in more, so that the common IP costs one map
// slot and no slice (issue 71: 150,000 pods). s.mu guards it.
type podIndex struct {
	first map[netip.Addr]claimCount
	more  map[netip.Addr][]claimCount
}

func newPodIndex() podIndex {
	return podIndex{first: map[netip.Addr]claimCount{}, more: map[netip.Addr][]claimCount{}}
}

// claim counts (sign 1) or uncounts (sign -1) the claim c.
func (x *podIndex) claim(c podClaim, sign int32) {
	f, ok := x.first[c.ip]
	switch {
	case !ok:
		x.first[c.ip] = claimCount{c.ns, c.node, sign}
		return
	case f.ns == c.ns && f.node == c.node:
		if f.n += sign; f.n != 0 {
			x.first[c.ip] = f
			return
		}
		// The first claim is gone: the last of the others takes its place.
		cl := x.more[c.ip]
		if len(cl) == 0 {
			delete(x.first, c.ip)
			return
		}
		x.first[c.ip] = cl[len(cl)-1]
		x.setMore(c.ip, cl[:len(cl)-1])
		return
	}
	cl := x.more[c.ip]
	switch i := indexClaim(cl, c); {
	case i < 0:
		cl = append(cl, claimCount{c.ns, c.node, sign})
	default:
		if cl[i].n += sign; cl[i].n == 0 {
			cl[i] = cl[len(cl)-1]
			cl = cl[:len(cl)-1]
		}
	}
	x.setMore(c.ip, cl)
}

func (x *podIndex) setMore(ip netip.Addr, cl []claimCount) {
	if len(cl) == 0 {
		delete(x.more, ip)
	} else {
		x.more[ip] = cl
	}
}

// each calls f with every claim count on ip.
func (x *podIndex) each(ip netip.Addr, f func(claimCount)) {
	if c, ok := x.first[ip]; ok {
		f(c)
		for _, c := range x.more[ip] {
			f(c)
		}
	}
}

func indexClaim(cl []claimCount, c podClaim) int {
	for i := range cl {
		if cl[i].ns == c.ns && cl[i].node == c.node {
			return i
		}
	}
	return -1
}

// facts is what the claims on ip agree on.
func (x *podIndex) facts(ip netip.Addr) podFacts {
	var f podFacts
	nsSplit, nodeSplit := false, false
	x.each(ip, func(c claimCount) {
		f.ns, nsSplit = agree(f.ns, c.ns, nsSplit)
		f.node, nodeSplit = agree(f.node, c.node, nodeSplit)
	})
	return f
}

// agree folds v into the value have that the claims so far agree on
// (split: two of them differ).
func agree(have, v string, split bool) (string, bool) {
	switch {
	case split || v == "" || v == have:
		return have, split
	case have == "":
		return v, false
	}
	return "", true
}

// podView is what a Snapshot holds of the pod-IP index: the facts of
// each IP, and the namespaces of the IPs that pods of two or more
// namespaces claim (nil when none; replaced, not modified, when it
// changes). A verified pod name, <dashed-ip>.<ns>.pod.<zone>, is answered
// from it (Snapshot.podName) rather than kept as a name: at 150,000 pods
// the names cost 15 MB (issue 71).
type podView struct {
	facts  *pack.Map[netip.Addr, podFacts]
	splits map[netip.Addr][]string
}

// hasName reports whether a pod of namespace ns (lowercase) claims ip.
func (v *podView) hasName(ip netip.Addr, ns string) bool {
	if v.facts == nil {
		return false
	}
	if f, _ := v.facts.Get(ip); f.ns != "" {
		return f.ns == ns
	}
	return slices.Contains(v.splits[ip], ns)
}

// namespaces returns the namespaces of the pods claiming ip, sorted.
func (x *podIndex) namespaces(ip netip.Addr) []string {
	var out []string
	x.each(ip, func(c claimCount) {
		if c.ns != "" && !slices.Contains(out, c.ns) {
			out = append(out, c.ns)
		}
	})
	slices.Sort(out)
	return out
}

// publish returns a Snapshot's view: prev edited at ips, or, when prev is
// empty, made from every claim. Its facts hold no IP that they know
// nothing of. changed, when not nil, is called with every IP and
// namespace whose pod name came or went.
func (x *podIndex) publish(prev podView, ips map[netip.Addr]struct{}, changed func(ip netip.Addr, ns string)) podView {
	if prev.facts == nil {
		m := pack.NewMap[netip.Addr, podFacts](len(x.first))
		var splits map[netip.Addr][]string
		for ip := range x.first {
			if f := x.facts(ip); f != (podFacts{}) {
				m.Set(ip, f)
			}
			if len(x.more[ip]) == 0 {
				continue // one claim: one namespace at most
			}
			if nss := x.namespaces(ip); len(nss) > 1 {
				if splits == nil {
					splits = map[netip.Addr][]string{}
				}
				splits[ip] = nss
			}
		}
		return podView{facts: m.Compact(), splits: splits}
	}
	next := prev
	var e *pack.MapEdit[netip.Addr, podFacts]
	cloned := false
	for ip := range ips {
		f := x.facts(ip)
		old, _ := prev.facts.Get(ip)
		nss := x.namespaces(ip)
		if len(nss) > 1 || prev.splits[ip] != nil {
			if !cloned {
				next.splits, cloned = maps.Clone(prev.splits), true
				if next.splits == nil {
					next.splits = map[netip.Addr][]string{}
				}
			}
			if len(nss) > 1 {
				next.splits[ip] = nss
			} else {
				delete(next.splits, ip)
			}
		}
		if changed != nil {
			was := prev.splits[ip]
			if old.ns != "" {
				was = []string{old.ns}
			}
			for _, ns := range was {
				if !slices.Contains(nss, ns) {
					changed(ip, ns)
				}
			}
			for _, ns := range nss {
				if !slices.Contains(was, ns) {
					changed(ip, ns)
				}
			}
		}
		if old == f {
			continue // a pod changed, not what its IPs say
		}
		if e == nil {
			e = prev.facts.Edit()
		}
		if f == (podFacts{}) {
			e.Del(ip)
		} else {
			e.Set(ip, f)
		}
	}
	if cloned && len(next.splits) == 0 {
		next.splits = nil
	}
	if e != nil {
		next.facts = e.Done()
	}
	return next
}
