package topology

import (
	"slices"
	"testing"
)

func TestPrefer(t *testing.T) {
	// Two topology zones, three nodes; b2 is not ready.
	eps := []Endpoint{
		{Zone: "a", Node: "a1", Ready: true},
		{Zone: "a", Node: "a2", Ready: true},
		{Zone: "b", Node: "b1", Ready: true},
		{Zone: "b", Node: "b2", Ready: false},
		{Ready: true}, // no topology
	}
	all := []int{0, 1, 2, 3, 4}
	tests := []struct {
		desc string
		td   string
		c    Client
		eps  []Endpoint
		want []int
	}{
		{"unset answers all", "", Client{Zone: "a", Node: "a1"}, eps, all},
		{"unknown value answers all", "PreferSomewhere", Client{Zone: "a", Node: "a1"}, eps, all},
		{"zone: its ready endpoints", PreferSameZone, Client{Zone: "a"}, eps, []int{0, 1}},
		{"zone: node ignored", PreferSameZone, Client{Zone: "b", Node: "a1"}, eps, []int{2}},
		{"PreferClose is PreferSameZone", PreferClose, Client{Zone: "b"}, eps, []int{2}},
		{"zone: none there answers all", PreferSameZone, Client{Zone: "c"}, eps, all},
		{"zone: unknown client answers all", PreferSameZone, Client{}, eps, all},
		{"zone: node only answers all", PreferSameZone, Client{Node: "a1"}, eps, all},
		{"zone: only not ready there answers all", PreferSameZone, Client{Zone: "b"},
			[]Endpoint{{Zone: "a", Ready: true}, {Zone: "b"}}, []int{0, 1}},
		{"node: its ready endpoint", PreferSameNode, Client{Zone: "a", Node: "a2"}, eps, []int{1}},
		{"node: not ready there falls to the zone", PreferSameNode, Client{Zone: "b", Node: "b2"}, eps, []int{2}},
		{"node: none there falls to the zone", PreferSameNode, Client{Zone: "a", Node: "a9"}, eps, []int{0, 1}},
		{"node: none in the zone answers all", PreferSameNode, Client{Zone: "c", Node: "c1"}, eps, all},
		{"node: zone unknown, node known", PreferSameNode, Client{Node: "b1"}, eps, []int{2}},
		{"node: zone unknown, node empty", PreferSameNode, Client{Node: "x"}, eps, all},
		{"no endpoints", PreferSameZone, Client{Zone: "a"}, nil, []int{}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := Prefer(tt.td, tt.c, tt.eps)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Prefer(%q, %+v) = %v, want %v", tt.td, tt.c, got, tt.want)
			}
		})
	}
}

func TestTiers(t *testing.T) {
	tests := []struct {
		td   string
		c    Client
		want []Tier
	}{
		{"", Client{Zone: "a", Node: "n"}, nil},
		{PreferSameZone, Client{Zone: "a", Node: "n"}, []Tier{{Zone: "a"}}},
		{PreferClose, Client{Zone: "a"}, []Tier{{Zone: "a"}}},
		{PreferSameNode, Client{Zone: "a", Node: "n"}, []Tier{{Node: "n"}, {Zone: "a"}}},
		{PreferSameNode, Client{Node: "n"}, []Tier{{Node: "n"}}},
		{PreferSameNode, Client{}, nil},
	}
	for _, tt := range tests {
		if got := Tiers(tt.td, tt.c); !slices.Equal(got, tt.want) {
			t.Errorf("Tiers(%q, %+v) = %v, want %v", tt.td, tt.c, got, tt.want)
		}
	}
}
