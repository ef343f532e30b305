package corefile

import (
	"strings"
	"testing"
)

// TestMulticluster: the kubernetes plugin's multicluster option becomes
// clustersetZone, read as CoreDNS 1.15's setup reads it; the out-of-tree
// multicluster and lighthouse plugins are dropped with a workaround.
func TestMulticluster(t *testing.T) {
	const fwd = "\n forward . 10.0.0.1\n}\n"
	const set = "clustersetZone clusterset.local: <svc>.<ns>.svc.clusterset.local answered from the cluster's ServiceImports (multicluster.x-k8s.io) and their EndpointSlices, as CoreDNS's multicluster option"
	const setDiffers = "in clusterset.local, pods' names (<ip>.<ns>.pod) are NXDOMAIN (CoreDNS answers them as in the cluster domain), " +
		"the SOA serial is the imports' last change (CoreDNS: 0 until an import is updated) and dns-version's TTL 28800 is not capped by the cache (CoreDNS's cache caps it)"
	for _, tc := range []struct {
		name, corefile string
		zone           string   // clustersetZone
		domain         string   // clusterDomain as converted ("" unset)
		report         []string // lines of the report, whole
		absent         []string // report substrings it must not have
	}{
		{name: "cilium's patch of kubeadm's Corefile",
			corefile: ".:53 {\n kubernetes cluster.local clusterset.local in-addr.arpa ip6.arpa {\n  multicluster clusterset.local\n  pods insecure\n  fallthrough in-addr.arpa ip6.arpa\n }\n cache 30 {\n  disable success cluster.local clusterset.local\n }" + fwd,
			zone:     "clusterset.local", domain: "cluster.local",
			report: []string{"Corefile:3   kubernetes  differs    " + set + "; " + setDiffers,
				// Cilium's sed puts the zone in the cache's disable lines too.
				"disable success cluster.local clusterset.local (the zone's answers are not kept in this cache)"},
			absent: []string{"one cluster domain", "rewrite name suffix", "  dropped  ", "cached like any forwarded answer"}},
		{name: "zone written otherwise",
			corefile: ".:53 {\n kubernetes cluster.local ClusterSet.Local. {\n  multicluster clusterset.local\n }" + fwd,
			zone:     "clusterset.local", domain: "cluster.local", absent: []string{"  dropped  "}},
		{name: "the server block's zones",
			corefile: "cluster.local clusterset.local {\n kubernetes {\n  multicluster clusterset.local\n }\n}\n.:53 {" + fwd,
			zone:     "clusterset.local", domain: "cluster.local", absent: []string{"  dropped  "}},
		{name: "the multicluster zone first",
			corefile: ".:53 {\n kubernetes clusterset.local cluster.local {\n  multicluster clusterset.local\n }" + fwd,
			zone:     "clusterset.local", domain: "cluster.local", absent: []string{"  dropped  "}},
		{name: "two multicluster zones",
			corefile: ".:53 {\n kubernetes cluster.local clusterset.local other.set {\n  multicluster clusterset.local other.set\n }" + fwd,
			zone:     "clusterset.local", domain: "cluster.local",
			report: []string{"Corefile:3  kubernetes  dropped    " + set + "; " + setDiffers + "; " +
				"multicluster zone other.set: one clustersetZone (clusterset.local); workaround: rewrite name suffix other.set clusterset.local, as both zones answer the same ServiceImports"},
			absent: []string{"one cluster domain"}},
		{name: "the last multicluster line",
			corefile: ".:53 {\n kubernetes cluster.local a.set b.set {\n  multicluster a.set\n  multicluster b.set\n }" + fwd,
			zone:     "b.set", domain: "cluster.local",
			report: []string{"Corefile:3  kubernetes  converted  multicluster a.set: replaced by the multicluster at Corefile:4, as in CoreDNS, which keeps the last"},
			// a.set is then a second cluster zone, as in CoreDNS.
			absent: []string{"zones b.set"}},
		{name: "multicluster with no zone",
			corefile: ".:53 {\n kubernetes cluster.local clusterset.local {\n  multicluster\n }" + fwd,
			domain:   "cluster.local",
			report: []string{"Corefile:3  kubernetes  converted  multicluster with no zone: CoreDNS serves no multicluster zone then; nothing to set",
				// CoreDNS answers the cluster's own Services there then.
				"Corefile:2  kubernetes  dropped    clusterDomain cluster.local; zones clusterset.local: one cluster domain (cluster.local); workaround: rewrite name suffix clusterset.local cluster.local; " +
					"for the Multi-Cluster Services' imports, add multicluster clusterset.local to this kubernetes block: it becomes clustersetZone"}},
		{name: "only the multicluster zone",
			corefile: ".:53 {\n kubernetes clusterset.local {\n  multicluster clusterset.local\n }" + fwd,
			zone:     "clusterset.local",
			report:   []string{"Corefile:2  kubernetes  differs    no zone besides the multicluster zone: serve answers the cluster's Services and pods under clusterDomain cluster.local too, where CoreDNS has no such zone"}},
		{name: "a multicluster zone inside the cluster domain",
			corefile: ".:53 {\n kubernetes cluster.local set.cluster.local {\n  multicluster set.cluster.local\n }" + fwd,
			domain:   "cluster.local",
			report:   []string{"Corefile:3  kubernetes  dropped    multicluster set.cluster.local: the zone overlaps the cluster domain cluster.local, whose names serve answers from the cluster's own Services; workaround: a zone of its own for the ServiceImports, clusterset.local as KEP-1645 names it"}},
		{name: "the out-of-tree multicluster plugin",
			corefile: ".:53 {\n kubernetes cluster.local\n multicluster clusterset.local" + fwd,
			domain:   "cluster.local",
			report: []string{"Corefile:3  multicluster  dropped    the out-of-tree multicluster plugin (github.com/coredns/multicluster, in a CoreDNS build of its own) answers clusterset.local from the cluster's ServiceImports; " +
				"workaround: clustersetZone: clusterset.local, which answers the same ServiceImports (multicluster.x-k8s.io) and their EndpointSlices, as the kubernetes plugin of CoreDNS 1.12.2+ does with multicluster clusterset.local"}},
		{name: "the out-of-tree multicluster plugin, the block's zone",
			corefile: "clusterset.local {\n multicluster {\n  fallthrough\n }\n}\n.:53 {\n kubernetes cluster.local" + fwd,
			domain:   "cluster.local",
			report:   []string{"answers clusterset.local from the cluster's ServiceImports; workaround: clustersetZone: clusterset.local,"}},
		{name: "lighthouse's Corefile",
			corefile: "clusterset.local:53 {\n lighthouse\n errors\n health\n ready\n}\n",
			report: []string{"Corefile:2  lighthouse  dropped    Submariner Lighthouse's plugin (lighthouse-coredns, a CoreDNS build of its own) answers clusterset.local from what Lighthouse's agent writes, choosing clusters by their Submariner gateways' health, which serve does not read; " +
				"workaround: keep Lighthouse's CoreDNS (Service submariner-lighthouse-coredns, namespace submariner-operator) and route the zone to it: forward: [{zone: clusterset.local, upstreams: [its ClusterIP]}], as Submariner's operator does in the cluster DNS"}},
		{name: "lighthouse after kubernetes (its first README)",
			corefile: ". {\n errors\n kubernetes cluster.local {\n  fallthrough\n }\n lighthouse supercluster.local {\n  ttl 5\n }" + fwd,
			domain:   "cluster.local",
			report:   []string{"answers supercluster.local from what Lighthouse's agent writes", "forward: [{zone: supercluster.local, upstreams: [its ClusterIP]}]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(tc.corefile)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Config.ClustersetZone != tc.zone || r.Config.ClusterDomain != tc.domain {
				t.Errorf("clustersetZone %q, clusterDomain %q; want %q, %q", r.Config.ClustersetZone, r.Config.ClusterDomain, tc.zone, tc.domain)
			}
			cfg := r.Config
			cfg.SetDefaults()
			if err := cfg.Validate(); err != nil {
				t.Errorf("the converted configuration does not validate: %v", err)
			}
			_, rep := render(t, r)
			lines := strings.Split(rep, "\n")
			for _, want := range tc.report {
				found := false
				for _, l := range lines {
					found = found || l == want || !strings.HasPrefix(want, "Corefile:") && strings.Contains(l, want)
				}
				if !found {
					t.Errorf("no report line %q in\n%s", want, rep)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(rep, a) {
					t.Errorf("report has %q:\n%s", a, rep)
				}
			}
		})
	}
}

// TestMulticlusterRefused: a multicluster zone that is none of the
// kubernetes plugin's zones is refused with CoreDNS 1.15's words (its
// binary: "plugin/kubernetes: Corefile:5 - Error during parsing: is not
// authoritative for the multicluster zone clusterset.local. (authoritative
// zones: [cluster.local.])").
func TestMulticlusterRefused(t *testing.T) {
	for _, tc := range []struct{ name, body, err string }{
		{"not a zone of the plugin", "kubernetes cluster.local {\n multicluster clusterset.local\n}",
			"Corefile:3: kubernetes: is not authoritative for the multicluster zone clusterset.local. (authoritative zones: [cluster.local.]) (CoreDNS refuses it too)"},
		{"the second zone", "kubernetes cluster.local clusterset.local 10.0.0.0/15 {\n multicluster ClusterSet.Local. other.local\n}",
			"is not authoritative for the multicluster zone other.local. (authoritative zones: [cluster.local. clusterset.local. 0.10.in-addr.arpa. 1.10.in-addr.arpa.])"},
		{"not the server block's zone either", "kubernetes {\n multicluster clusterset.local\n}",
			"is not authoritative for the multicluster zone clusterset.local. (authoritative zones: [.])"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantRefused(t, tc.body, tc.err) })
	}
}
