package forward

import (
	"context"
	"net/netip"
	"testing"
)

// TestTake: which exchange gives its slot up when all are taken (shares'
// rules). held lists the slots taken before, oldest first, by client and
// domain; the newcomer is of client and domain.
func TestTake(t *testing.T) {
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	type held struct {
		client netip.Addr
		domain string
	}
	for _, tc := range []struct {
		name   string
		max    int
		held   []held
		client netip.Addr
		domain string
		// victim is the index in held of the exchange shed; -1 none.
		victim int
		ok     bool
	}{
		{"room left", 3, []held{{a, "x"}, {a, "x"}}, b, "x", -1, true},
		{"a smaller client takes the largest's oldest", 3, []held{{a, "x"}, {b, "y"}, {a, "x"}}, b, "y", 0, true},
		{"a new client takes the largest's oldest", 2, []held{{a, "x"}, {a, "y"}}, c, "z", 0, true},
		{"the largest makes room from its largest domain", 3, []held{{a, "y"}, {a, "x"}, {a, "x"}}, a, "y", 1, true},
		{"a new domain of the largest makes room from its largest", 3, []held{{a, "x"}, {a, "y"}, {a, "x"}}, a, "z", 0, true},
		{"the largest is refused for its largest domain", 2, []held{{a, "x"}, {a, "x"}}, a, "x", -1, false},
		{"a domain as large as the largest counts as it", 2, []held{{a, "x"}, {a, "y"}}, a, "y", -1, false},
		{"a client as large as the largest counts as it", 2, []held{{a, "x"}, {b, "y"}}, b, "y", -1, false},
		{"and makes room from its own larger domain", 2, []held{{a, "x"}, {b, "y"}}, b, "z", 1, true},
		{"of two clients as large, the one whose oldest is older gives way", 4, []held{{b, "y"}, {a, "x"}, {a, "x"}, {b, "y"}}, c, "z", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newShares(tc.max)
			causes := make([]context.Context, len(tc.held))
			for i, h := range tc.held {
				ctx, cancel := context.WithCancelCause(context.Background())
				causes[i] = ctx
				if sl, _ := s.take(h.client, h.domain, cancel); sl == nil {
					t.Fatalf("held slot %d refused", i)
				}
			}
			_, cancel := context.WithCancelCause(context.Background())
			sl, shed := s.take(tc.client, tc.domain, cancel)
			if (sl != nil) != tc.ok || shed != (tc.victim >= 0) {
				t.Fatalf("take: slot %v shed %v; want slot %v, shed %v", sl != nil, shed, tc.ok, tc.victim >= 0)
			}
			for i, ctx := range causes {
				if gone := context.Cause(ctx) == errShed; gone != (i == tc.victim) {
					t.Errorf("held slot %d shed: %v, want %v", i, gone, i == tc.victim)
				}
			}
			if n, _ := s.usage(); tc.ok && n != min(len(tc.held)+1, tc.max) {
				t.Errorf("%d in flight, want %d", n, min(len(tc.held)+1, tc.max))
			}
		})
	}
}
