package nodelocal

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// clusterByLabels is Routes.Cluster as the DNS reads a name: its suffixes
// at label boundaries, an escaped dot ("a\.b") inside a label.
func clusterByLabels(r *Routes, name string) bool {
	if len(r.unbounded) > 0 {
		return true
	}
	if name == "" || len(name) > 255 {
		return false
	}
	fq := strings.ToLower(dns.Fqdn(name))
	if _, ok := r.names[fq]; ok {
		return true
	}
	idx := dns.Split(fq)
	for k := 1; k < len(idx); k++ {
		if r.names[fq[idx[k]:]] {
			return true
		}
	}
	return false
}

// FuzzRoutes (issue 55): node-local's routes over any name, escaped dots,
// 255-byte names and odd case among them, agree with the label-by-label
// reading of the name, and never panic.
func FuzzRoutes(f *testing.F) {
	for _, s := range []string{"web.default.svc.cluster.local.", "WEB.Default.SVC.cluster.LOCAL", "x\\.cluster.local.",
		"a.b\\\\.cluster.local.", "cluster.local.", "corp.example.", "db.example.com.", "1.0.96.10.in-addr.arpa.",
		strings.Repeat("a.", 127), strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + ".cluster.local.", ".", "", "\\.", "..cluster.local."} {
		f.Add(s)
	}
	r := NewRoutes("cluster.local", clusterConfig(), nil, nil)
	f.Fuzz(func(t *testing.T, name string) {
		got := r.Cluster(name)
		if _, ok := dns.IsDomainName(name); !ok || len(name) > 254 {
			return // only well-formed names are asked; the rest must not panic
		}
		if want := clusterByLabels(r, name); got != want {
			t.Fatalf("Cluster(%q) = %v, want %v (by labels)", name, got, want)
		}
	})
}
