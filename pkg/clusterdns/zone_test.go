package clusterdns

import "testing"

// TestInZoneFold: the reply cache's zone test on a name as asked agrees
// with inZone on the same name in lowercase, and folds ASCII only.
func TestInZoneFold(t *testing.T) {
	for _, tc := range []struct {
		name, zone string
		want       bool
	}{
		{"web.ns.svc.cluster.local.", "cluster.local.", true},
		{"WEB.NS.SVC.Cluster.LOCAL.", "cluster.local.", true},
		{"cluster.local.", "cluster.local.", true},
		{"CLUSTER.LOCAL.", "cluster.local.", true},
		{"xcluster.local.", "cluster.local.", false},
		{"luster.local.", "cluster.local.", false},
		{"web.cluster.locax.", "cluster.local.", false},
		{"1.0.0.10.IN-ADDR.ARPA.", reverse4, true},
		{"example.com.", "", true},                                   // the root holds every name, as inZone
		{"web.ns.svc.cluster.loc\xc4\xb1.", "cluster.local.", false}, // no Unicode folding
		{"web.ns.svc.\xe2\x84\xaaluster.local.", "kluster.local.", false},
	} {
		if got := inZoneFold([]byte(tc.name), tc.zone); got != tc.want {
			t.Errorf("inZoneFold(%q, %q) = %v, want %v", tc.name, tc.zone, got, tc.want)
		}
		if got, want := inZoneFold([]byte(tc.name), tc.zone), inZone(asciiLower(tc.name), tc.zone); got != want {
			t.Errorf("inZoneFold(%q, %q) = %v, inZone of its lowercase %v", tc.name, tc.zone, got, want)
		}
	}
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// inZoneFold is inZone for a name in any case; zone is lowercase.
func inZoneFold(name []byte, zone string) bool {
	if len(name) < len(zone) || (len(name) > len(zone) && name[len(name)-len(zone)-1] != '.') {
		return false
	}
	for i, c := range name[len(name)-len(zone):] {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != zone[i] {
			return false
		}
	}
	return true
}
