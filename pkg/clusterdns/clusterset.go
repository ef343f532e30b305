package clusterdns

import "strings"

// clusterset is the Multi-Cluster Services zone (KEP-1645), answered
// from a record store of its own that the clusterset feed fills from the
// ServiceImports (kubefeed.Clusterset): the same rules as the cluster
// zone's over other records. Its replies are not kept in the reply cache,
// whose retirement follows the cluster store's changes only.
type clusterset struct {
	name    string // lowercase FQDN
	records Records
	local   func() string // this cluster's ID, "" unknown
	views   views
}

// WithClusterset answers the zone of records (e.g. clusterset.local.)
// from it, before the cluster zone; SERVFAIL until its first sync. An
// import with a traffic distribution answers a client the ready
// endpoints of its topology zone, else those of local (this cluster's ID;
// nil or "": skipped), else all, as kubefeed.Clusterset keeps them.
func WithClusterset(records Records, local func() string) Option {
	return func(h *Handler) {
		name := zoneOf(records)
		if snap := records.Snapshot(); snap != nil {
			name = snap.Zone
		}
		if local == nil {
			local = func() string { return "" }
		}
		h.cset = &clusterset{name: name, records: records, local: local}
	}
}

// zoneNamer is a Records that knows its zone before its first snapshot
// (store.Store).
type zoneNamer interface{ Zone() string }

// zoneOf is the zone of records.
func zoneOf(records Records) string {
	if n, ok := records.(zoneNamer); ok {
		return n.Zone()
	}
	return ""
}

// zone is the view of the current snapshot, nil before the first.
func (c *clusterset) zone() *zone { return c.views.current(c.records, nil) }

// reserved says whether lname is <label>.<svc>.<ns>.svc.<zone> in the
// clusterset zone: the spec reserves <clusterid>.<svc> and names no other
// name of that depth (an endpoint is <hostname>.<clusterid>.<svc>), so it
// is NXDOMAIN, not the empty non-terminal the store has above an
// endpoint's name, as in CoreDNS.
func reserved(lname, zone string) bool {
	base, ok := strings.CutSuffix(lname, ".svc."+zone)
	return ok && strings.Count(base, ".") == 2
}

// clusterNamespace says whether lname is <ns>.svc.<zone> of the
// clusterset zone for a namespace the cluster has (the cluster zone's
// records).
func (h *Handler) clusterNamespace(lname, zone string) bool {
	ns, ok := strings.CutSuffix(lname, ".svc."+zone)
	if !ok || strings.Contains(ns, ".") {
		return false
	}
	z := h.zone()
	return z != nil && z.snap.HasNamespace(ns)
}
