package forward

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

// TestTake: which exchange gives its slot up when all are taken (shares'
// rules), on a clock the test moves. held lists the slots taken before,
// oldest first, by client and age; the newcomer is of client want.
func TestTake(t *testing.T) {
	const jostle = time.Second
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	type held struct {
		client netip.Addr
		age    time.Duration
	}
	for _, tc := range []struct {
		name   string
		max    int
		held   []held
		client netip.Addr
		// victim is the index in held of the exchange shed; -1 none.
		victim int
		ok     bool
	}{
		{"room left", 3, []held{{a, 0}, {a, 0}}, b, -1, true},
		{"a smaller client takes the largest's oldest, however young", 3, []held{{a, 0}, {b, 0}, {a, 0}}, b, 0, true},
		{"a new client takes the largest's oldest", 2, []held{{a, 0}, {a, 0}}, c, 0, true},
		{"the largest waits for its own oldest to age", 2, []held{{a, 2 * time.Second}, {a, 0}}, a, 0, true},
		{"the largest is refused while its own are young", 2, []held{{a, jostle / 2}, {a, 0}}, a, -1, false},
		{"a client as large as the largest counts as it", 2, []held{{a, 3 * time.Second}, {b, jostle / 2}}, b, -1, false},
		{"of two as large, the one whose oldest is older gives way", 4, []held{{b, 3 * time.Second}, {a, 2 * time.Second}, {a, 0}, {b, 0}}, c, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			s := newShares(tc.max, jostle)
			s.now = func() time.Time { return now }
			causes := make([]context.Context, len(tc.held))
			for i, h := range tc.held {
				// Taken in order, each its age before the newcomer.
				now = time.Unix(1000, 0).Add(-h.age)
				ctx, cancel := context.WithCancelCause(context.Background())
				causes[i] = ctx
				if sl, _ := s.take(h.client, cancel); sl == nil {
					t.Fatalf("held slot %d refused", i)
				}
			}
			now = time.Unix(1000, 0)
			_, cancel := context.WithCancelCause(context.Background())
			sl, shed := s.take(tc.client, cancel)
			if (sl != nil) != tc.ok || shed != (tc.victim >= 0) {
				t.Fatalf("take: slot %v shed %v; want slot %v, shed %v", sl != nil, shed, tc.ok, tc.victim >= 0)
			}
			for i, ctx := range causes {
				if gone := context.Cause(ctx) == errShed; gone != (i == tc.victim) {
					t.Errorf("held slot %d shed: %v, want %v", i, gone, i == tc.victim)
				}
			}
			if want := min(len(tc.held)+1, tc.max); tc.ok && s.inFlight() != want {
				t.Errorf("%d in flight, want %d", s.inFlight(), want)
			}
		})
	}
}
