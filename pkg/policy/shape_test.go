package policy

import (
	"strings"
	"testing"
)

func TestParseAutopath(t *testing.T) {
	tests := []struct {
		qname, zone string
		want        AutopathName
		ok          bool
	}{
		{"web.search.shop.cluster.local.ap.k8s.io.", "cluster.local", AutopathName{"web.", "shop"}, true},
		{"WWW.Example.COM.search.Shop.Cluster.Local.AP.K8S.IO.", "cluster.local.", AutopathName{"WWW.Example.COM.", "shop"}, true},
		{"a.search.search.ns.cluster.local.ap.k8s.io.", "cluster.local", AutopathName{"a.search.", "ns"}, true},
		{"search.search.ns.cluster.local.ap.k8s.io.", "cluster.local", AutopathName{"search.", "ns"}, true},
		{"_http._tcp.web.search.ns.k8s.example.ap.k8s.io.", "k8s.example", AutopathName{"_http._tcp.web.", "ns"}, true},
		// not autopath names
		{"search.ns.cluster.local.ap.k8s.io.", "cluster.local", AutopathName{}, false},      // no base
		{"web.find.ns.cluster.local.ap.k8s.io.", "cluster.local", AutopathName{}, false},    // no "search" label
		{"web.search.ns.other.zone.ap.k8s.io.", "cluster.local", AutopathName{}, false},     // another zone
		{"web.search.ns.cluster.local.", "cluster.local", AutopathName{}, false},            // no suffix
		{"web.search.ns.xcluster.local.ap.k8s.io.", "cluster.local", AutopathName{}, false}, // zone must be whole labels
		{"ap.k8s.io.", "cluster.local", AutopathName{}, false},
		{"web.search.ns.cluster.local.ap.k8s.io.", "", AutopathName{}, false},
		// never expand a name that already carries the suffix
		{"x.search.ns.cluster.local.ap.k8s.io.search.ns.cluster.local.ap.k8s.io.", "cluster.local", AutopathName{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.qname, func(t *testing.T) {
			got, ok := ParseAutopath(tc.qname, tc.zone)
			if ok != tc.ok || got != tc.want {
				t.Errorf("ParseAutopath = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// FuzzParseAutopath checks that an accepted autopath name rebuilds from its parts
// and that its base never carries the suffix.
func FuzzParseAutopath(f *testing.F) {
	for _, s := range []string{
		"web.search.shop.cluster.local.ap.k8s.io.",
		"WWW.Example.COM.search.Shop.Cluster.Local.AP.K8S.IO.",
		"search.search.ns.cluster.local.ap.k8s.io.",
		"x.search.ns.cluster.local.ap.k8s.io.search.ns.cluster.local.ap.k8s.io.",
		"ap.k8s.io.", ".", "",
	} {
		f.Add(s, "cluster.local")
	}
	f.Fuzz(func(t *testing.T, qname, zone string) {
		n, ok := ParseAutopath(qname, zone)
		if !ok {
			return
		}
		z := strings.TrimSuffix(strings.ToLower(zone), ".")
		want := strings.TrimSuffix(n.Base, ".") + ".search." + n.Namespace + "." + z + "." + AutopathZone + "."
		if !strings.EqualFold(qname, want) {
			t.Fatalf("ParseAutopath(%q, %q) = %+v; rebuilt %q", qname, zone, n, want)
		}
		if n.Namespace != strings.ToLower(n.Namespace) || strings.Contains(n.Namespace, ".") {
			t.Fatalf("namespace %q", n.Namespace)
		}
		if hasSuffixFold(n.Base, "."+AutopathZone+".") || strings.EqualFold(n.Base, AutopathZone+".") {
			t.Fatalf("base %q carries the suffix", n.Base)
		}
	})
}
