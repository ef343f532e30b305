package store

import (
	"net/netip"

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

// podIndex counts the claims on each pod IP. s.mu guards it.
type podIndex struct {
	claims map[netip.Addr][]claimCount
}

func newPodIndex() podIndex { return podIndex{claims: map[netip.Addr][]claimCount{}} }

// claim counts (sign 1) or uncounts (sign -1) the claim c.
func (x *podIndex) claim(c podClaim, sign int32) {
	cl := x.claims[c.ip]
	switch i := indexClaim(cl, c); {
	case i < 0:
		cl = append(cl, claimCount{c.ns, c.node, sign})
	default:
		if cl[i].n += sign; cl[i].n == 0 {
			cl[i] = cl[len(cl)-1]
			cl = cl[:len(cl)-1]
		}
	}
	if len(cl) == 0 {
		delete(x.claims, c.ip)
	} else {
		x.claims[c.ip] = cl
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
	for _, c := range x.claims[ip] {
		f.ns, nsSplit = agree(f.ns, c.ns, nsSplit)
		f.node, nodeSplit = agree(f.node, c.node, nodeSplit)
	}
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

// publish returns a Snapshot's index: prev edited at ips, or, when prev is
// nil, made from every claim. It holds no IP that it knows nothing of.
func (x *podIndex) publish(prev *pack.Map[netip.Addr, podFacts], ips map[netip.Addr]struct{}) *pack.Map[netip.Addr, podFacts] {
	if prev == nil {
		m := pack.NewMap[netip.Addr, podFacts](len(x.claims))
		for ip := range x.claims {
			if f := x.facts(ip); f != (podFacts{}) {
				m.Set(ip, f)
			}
		}
		return m.Compact()
	}
	var e *pack.MapEdit[netip.Addr, podFacts]
	for ip := range ips {
		f := x.facts(ip)
		if old, _ := prev.Get(ip); old == f {
			continue // a pod changed, not what its IPs say
		}
		if e == nil {
			e = prev.Edit()
		}
		if f == (podFacts{}) {
			e.Del(ip)
		} else {
			e.Set(ip, f)
		}
	}
	if e == nil {
		return prev
	}
	return e.Done()
}
