package store

import (
	"maps"
	"net/netip"
	"slices"
	"unique"

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
	ns, node interned
}

// podFacts is what a Snapshot knows of a pod IP: the namespace and the
// node its claimers agree on, "" for what they do not say or disagree on.
type podFacts struct{ ns, node interned }

// interned is a namespace or node name made unique: one word where a
// string is two, in each of 150,000 pod IPs' entries (issue 71). The zero
// interned is "". Two are equal when their names are.
type interned struct{ h unique.Handle[string] }

func intern(s string) interned {
	if s == "" {
		return interned{}
	}
	return interned{unique.Make(s)}
}

func (i interned) String() string {
	if i == (interned{}) {
		return ""
	}
	return i.h.Value()
}

// claimCount counts the pods claiming an IP with one namespace and node.
type claimCount struct {
	ns, node interned
	n        int32
}

// podEntry is what the index holds of a pod IP: the facts its claimers
// agree on and, when they all have one namespace and node (nearly every
// IP: one pod, or the pods of one namespace and node), their count. n is
// 0 when they differ; their counts are then in podIndex.more.
type podEntry struct {
	podFacts
	n int32
}

// podIndex counts the claims on each pod IP. Its map is the one the last
// Snapshot published, edited copy-on-write by the claims since, so the
// common IP costs one entry, not a mutable map's slot beside the
// published one (issue 71: 150,000 pods). s.mu guards it.
type podIndex struct {
	m *pack.Map[netip.Addr, podEntry]
	// edit is the next version of m, from the first claim after a
	// Publish; nil while m is not published yet (a rebuild sets m in
	// place).
	edit      *pack.MapEdit[netip.Addr, podEntry]
	published bool
	more      map[netip.Addr][]claimCount
}

// newPodIndex is an empty index for about size pod IPs.
func newPodIndex(size int) podIndex {
	return podIndex{m: pack.NewMap[netip.Addr, podEntry](size), more: map[netip.Addr][]claimCount{}}
}

func (x *podIndex) get(ip netip.Addr) (podEntry, bool) {
	if x.edit != nil {
		return x.edit.Get(ip)
	}
	return x.m.Get(ip)
}

func (x *podIndex) set(ip netip.Addr, e podEntry) {
	switch {
	case !x.published:
		x.m.Set(ip, e)
	case x.edit == nil:
		x.edit = x.m.Edit()
		fallthrough
	default:
		x.edit.Set(ip, e)
	}
}

func (x *podIndex) del(ip netip.Addr) {
	switch {
	case !x.published:
		x.m.Del(ip)
	case x.edit == nil:
		x.edit = x.m.Edit()
		fallthrough
	default:
		x.edit.Del(ip)
	}
}

// claim counts (sign 1) or uncounts (sign -1) the claim c.
func (x *podIndex) claim(c podClaim, sign int32) {
	e, ok := x.get(c.ip)
	switch {
	case !ok:
		x.set(c.ip, podEntry{podFacts{c.ns, c.node}, sign})
		return
	case e.n != 0 && e.ns == c.ns && e.node == c.node:
		if e.n += sign; e.n == 0 {
			x.del(c.ip)
		} else {
			x.set(c.ip, e)
		}
		return
	case e.n != 0:
		// A second claim that differs: the counts move to more.
		x.setMore(c.ip, []claimCount{{e.ns, e.node, e.n}, {c.ns, c.node, sign}})
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

// setMore records the claim counts cl of ip: in its entry when there is
// one, in more when they differ.
func (x *podIndex) setMore(ip netip.Addr, cl []claimCount) {
	switch len(cl) {
	case 0:
		delete(x.more, ip)
		x.del(ip)
	case 1:
		delete(x.more, ip)
		x.set(ip, podEntry{podFacts{cl[0].ns, cl[0].node}, cl[0].n})
	default:
		x.more[ip] = cl
		var f podFacts
		nsSplit, nodeSplit := false, false
		for _, c := range cl {
			f.ns, nsSplit = agree(f.ns, c.ns, nsSplit)
			f.node, nodeSplit = agree(f.node, c.node, nodeSplit)
		}
		x.set(ip, podEntry{f, 0})
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

// agree folds v into the value have that the claims so far agree on
// (split: two of them differ).
func agree(have, v interned, split bool) (interned, bool) {
	switch {
	case split || v == (interned{}) || v == have:
		return have, split
	case have == (interned{}):
		return v, false
	}
	return interned{}, true
}

// podView is what a Snapshot holds of the pod-IP index: the facts of
// each IP, and the namespaces of the IPs that pods of two or more
// namespaces claim (nil when none; replaced, not modified, when it
// changes). A verified pod name, <dashed-ip>.<ns>.pod.<zone>, is answered
// from it (Snapshot.podName) rather than kept as a name: at 150,000 pods
// the names cost 15 MB (issue 71).
type podView struct {
	facts  *pack.Map[netip.Addr, podEntry]
	splits map[netip.Addr][]string
}

// hasName reports whether a pod of namespace ns (lowercase) claims ip.
func (v *podView) hasName(ip netip.Addr, ns string) bool {
	if v.facts == nil {
		return false
	}
	if f, _ := v.facts.Get(ip); f.ns != (interned{}) {
		return f.ns.String() == ns
	}
	return slices.Contains(v.splits[ip], ns)
}

// namespaces returns the namespaces of the pods claiming ip, sorted.
func (x *podIndex) namespaces(ip netip.Addr) []string {
	e, ok := x.get(ip)
	switch {
	case !ok:
		return nil
	case e.n != 0:
		if e.ns == (interned{}) {
			return nil
		}
		return []string{e.ns.String()}
	}
	var out []string
	for _, c := range x.more[ip] {
		if ns := c.ns.String(); ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// publish returns a Snapshot's view: prev with the claims since at ips,
// or, when prev is empty, of every claim. changed, when not nil, is
// called with every IP and namespace whose pod name came or went.
func (x *podIndex) publish(prev podView, ips map[netip.Addr]struct{}, changed func(ip netip.Addr, ns string)) podView {
	if x.edit != nil {
		x.m, x.edit = x.edit.Done(), nil
	}
	if !x.published {
		x.m, x.published = x.m.Compact().Resized(), true
	}
	if prev.facts == nil {
		var splits map[netip.Addr][]string
		for ip := range x.more {
			if nss := x.namespaces(ip); len(nss) > 1 {
				if splits == nil {
					splits = map[netip.Addr][]string{}
				}
				splits[ip] = nss
			}
		}
		return podView{facts: x.m, splits: splits}
	}
	next := prev
	next.facts = x.m
	cloned := false
	for ip := range ips {
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
			if old.ns != (interned{}) {
				was = []string{old.ns.String()}
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
	}
	if cloned && len(next.splits) == 0 {
		next.splits = nil
	}
	return next
}
