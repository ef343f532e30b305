package store

import (
	"maps"
	"net/netip"
	"slices"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/pack"
)

// A client without the node-local stage is placed by its source address:
// the pod with that IP runs on a node, and the node's topology zone label
// says where. The Store keeps each pod IP's node and each node's topology
// zone beside the records, outside the units: they make no name. A Publish
// edits the Snapshot's pod-IP index where pods changed, and copies the
// node map when a node's topology zone changed (rare: a node's other
// updates do not reach the Store).

// NodeTopology is the slim form of a core/v1 Node: its name and its
// topology.kubernetes.io/zone label ("" when absent).
type NodeTopology struct {
	Name         string
	TopologyZone string
}

// topoIndex is the Store's pod-IP and node index. s.mu guards it.
type topoIndex struct {
	// claims holds, for each pod IP, the nodes of the pods with that IP
	// (a reused IP the watch has not caught up with has two).
	claims map[netip.Addr][]nodeCount
	dirty  map[netip.Addr]struct{}
	zones  map[string]string // node → topology zone
	// zonesChanged says the next Publish copies zones; full that it
	// builds the pod-IP index again (after Replace).
	zonesChanged, full bool
}

type nodeCount struct {
	node string
	n    int32
}

func newTopoIndex() topoIndex {
	return topoIndex{claims: map[netip.Addr][]nodeCount{}, dirty: map[netip.Addr]struct{}{},
		zones: map[string]string{}, zonesChanged: true, full: true}
}

// claim counts (sign 1) or uncounts (sign -1) the IPs of pod p.
func (t *topoIndex) claim(p Pod, sign int32) {
	if p.NodeName == "" {
		return
	}
	for _, ip := range p.IPs {
		ip = ip.Unmap()
		cl := t.claims[ip]
		i := slices.IndexFunc(cl, func(c nodeCount) bool { return c.node == p.NodeName })
		if i < 0 {
			cl = append(cl, nodeCount{p.NodeName, sign})
		} else if cl[i].n += sign; cl[i].n == 0 {
			cl = slices.Delete(cl, i, i+1)
		}
		if len(cl) == 0 {
			delete(t.claims, ip)
		} else {
			t.claims[ip] = cl
		}
		if !t.full { // a full publish reads every claim anyway
			t.dirty[ip] = struct{}{}
		}
	}
}

// node is the node of ip in the Snapshot's index: "" when pods of two
// nodes claim it; ok is false when none does.
func (t *topoIndex) node(ip netip.Addr) (string, bool) {
	switch cl := t.claims[ip]; len(cl) {
	case 0:
		return "", false
	case 1:
		return cl[0].node, true
	}
	return "", true
}

// reset builds the index again from pods (Replace).
func (t *topoIndex) reset(pods map[nsName]Pod, nodes []NodeTopology) {
	*t = newTopoIndex()
	for _, p := range pods {
		t.claim(p, 1)
	}
	for _, n := range nodes {
		t.zones[n.Name] = n.TopologyZone
	}
}

// publish sets the pod-IP index and the node map of snap, from prev's
// where it can. s.mu is held.
func (t *topoIndex) publish(prev, snap *Snapshot) {
	if t.full || prev == nil || prev.podNode == nil {
		m := pack.NewMap[netip.Addr, string](len(t.claims))
		for ip := range t.claims {
			v, _ := t.node(ip)
			m.Set(ip, v)
		}
		snap.podNode = m.Compact()
	} else if len(t.dirty) > 0 {
		e := prev.podNode.Edit()
		for ip := range t.dirty {
			if v, ok := t.node(ip); ok {
				e.Set(ip, v)
			} else {
				e.Del(ip)
			}
		}
		snap.podNode = e.Done()
	} else {
		snap.podNode = prev.podNode
	}
	if t.zonesChanged || prev == nil {
		snap.nodeZones = maps.Clone(t.zones)
	} else {
		snap.nodeZones = prev.nodeZones
	}
	clear(t.dirty)
	t.full, t.zonesChanged = false, false
}

// SetNodeTopology adds or replaces a node's topology zone.
func (s *Store) SetNodeTopology(v NodeTopology) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if z, ok := s.topo.zones[v.Name]; ok && z == v.TopologyZone {
		return // a node's status update
	}
	s.topo.zones[v.Name] = v.TopologyZone
	s.topo.zonesChanged = true
}

// DeleteNodeTopology removes a node.
func (s *Store) DeleteNodeTopology(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.topo.zones[name]; ok {
		delete(s.topo.zones, name)
		s.topo.zonesChanged = true
	}
}
