package store

import "maps"

// nodeZones is each node's topology zone: where a client on that node is
// (ClientTopology). Nodes make no name, and a node's other updates do not
// reach the Store, so a Publish copies the map only when a zone changed
// (rare), and Snapshots share it otherwise. s.mu guards it.
type nodeZones struct {
	m map[string]string // node → topology zone
	// changed says the next Publish copies m.
	changed bool
}

func newNodeZones(nodes []NodeTopology) nodeZones {
	z := nodeZones{m: make(map[string]string, len(nodes)), changed: true}
	for _, n := range nodes {
		z.m[n.Name] = n.TopologyZone
	}
	return z
}

// set adds or replaces a node's zone.
func (z *nodeZones) set(v NodeTopology) {
	if old, ok := z.m[v.Name]; ok && old == v.TopologyZone {
		return // a node's status update
	}
	z.m[v.Name] = v.TopologyZone
	z.changed = true
}

// remove forgets a node.
func (z *nodeZones) remove(name string) {
	if _, ok := z.m[name]; ok {
		delete(z.m, name)
		z.changed = true
	}
}

// publish is the map of the next Snapshot: prev when no zone changed.
func (z *nodeZones) publish(prev map[string]string) map[string]string {
	if !z.changed {
		return prev
	}
	z.changed = false
	return maps.Clone(z.m)
}
