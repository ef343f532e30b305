package topology

import "testing"

func TestParseScoped(t *testing.T) {
	const zone = "cluster.local."
	tests := []struct {
		name string
		want Scoped
		ok   bool
	}{
		{"za.pin._zone.web.ns.svc.cluster.local.", Scoped{Zone: "za", Base: "web.ns.svc.cluster.local."}, true},
		{"za.prefer._zone.web.ns.svc.cluster.local.", Scoped{Zone: "za", Prefer: true, Base: "web.ns.svc.cluster.local."}, true},
		{"corp.example.com.pin._zone.web.ns.svc.cluster.local.", Scoped{Zone: "corp.example.com", Base: "web.ns.svc.cluster.local."}, true},
		{"pin._zone.web.ns.svc.cluster.local.", Scoped{}, false},      // no topology zone
		{"za.near._zone.web.ns.svc.cluster.local.", Scoped{}, false},  // unknown directive
		{"za.pin.zone.web.ns.svc.cluster.local.", Scoped{}, false},    // no _zone
		{"za.pin._zone.web.ns.pod.cluster.local.", Scoped{}, false},   // pods have none
		{"za.pin._zone.web.ns.svc.cluster.example.", Scoped{}, false}, // another zone
		{"web-0.web.ns.svc.cluster.local.", Scoped{}, false},          // an endpoint name
		{"za.pin._zone.web.ns.svc.other.svc.cluster.local.", Scoped{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseScoped(tt.name, zone)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("ParseScoped(%s) = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
