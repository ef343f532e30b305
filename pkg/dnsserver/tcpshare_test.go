package dnsserver

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestTCPShare runs sequences of acquires and releases on a tcpShare and
// checks after each step whether an acquire waited, and the slots each
// client holds.
func TestTCPShare(t *testing.T) {
	type step struct {
		client  string // a, b or c
		n       int    // acquires (or releases) of client; 1 when 0
		release bool
		waits   bool   // the acquires wait
		held    string // after the step: "a=6 b=0"
	}
	for _, tc := range []struct {
		name                    string
		max, perClient, reserve int
		steps                   []step
	}{
		{"a client alone leaves the reserve", 8, 8, 2, []step{
			{client: "a", n: 6, held: "a=6"},
			{client: "a", waits: true, held: "a=6"},
		}},
		{"a client under its share takes the reserve", 8, 8, 2, []step{
			{client: "a", n: 6, held: "a=6"},
			{client: "b", n: 2, held: "a=6 b=2"},
			{client: "b", waits: true, held: "a=6 b=2"},
		}},
		{"a freed slot goes to the waiting client holding the fewest", 4, 4, 0, []step{
			{client: "a", n: 4, held: "a=4"},
			{client: "a", waits: true, held: "a=4"},
			{client: "b", waits: true, held: "a=4 b=0"},
			{client: "a", release: true, held: "a=3 b=1"},
			{client: "a", release: true, held: "a=3 b=1"}, // a's waiter takes it
			{client: "b", release: true, held: "a=3"},
		}},
		{"the per-client bound", 8, 3, 0, []step{
			{client: "a", n: 3, held: "a=3"},
			{client: "a", waits: true, held: "a=3"},
			{client: "b", n: 3, held: "a=3 b=3"},
			{client: "a", release: true, held: "a=3 b=3"}, // its waiter takes it
		}},
		{"a client over its share waits while others are under theirs", 12, 12, 3, []step{
			{client: "a", n: 9, held: "a=9"}, // share 6, then down to the reserve
			{client: "b", n: 3, held: "a=9 b=3"},
			{client: "c", waits: true, held: "a=9 b=3 c=0"},
			{client: "a", release: true, held: "a=8 b=3 c=1"},
			{client: "a", waits: true, held: "a=8 b=3 c=1"}, // share 3: over it, no free slot
			{client: "c", release: true, held: "a=8 b=3"},   // a still over: the slot stays free
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTCPShare(tc.max, tc.perClient, tc.reserve)
			stop := make(chan struct{})
			var pending []chan bool
			defer func() {
				close(stop)
				for _, p := range pending {
					<-p
				}
				sum := 0
				for _, c := range s.clients {
					sum += c.held
					if c.held == 0 || len(c.waiters) > 0 {
						t.Errorf("after every waiter stopped: %v holds %d, %d waiting", c.addr, c.held, len(c.waiters))
					}
				}
				if sum != s.total || len(s.waiting) > 0 {
					t.Errorf("after every waiter stopped: total %d, held %d, %d clients waiting", s.total, sum, len(s.waiting))
				}
			}()
			for i, st := range tc.steps {
				addr := netip.AddrFrom4([4]byte{127, 0, 0, st.client[0]})
				for range max(st.n, 1) {
					if st.release {
						s.release(addr)
						continue
					}
					waited, got := make(chan struct{}, 1), make(chan bool, 1)
					go func() { got <- s.acquire(addr, stop, func() { waited <- struct{}{} }) }()
					select {
					case <-waited:
						if !st.waits {
							t.Fatalf("step %d: %s's acquire waits", i, st.client)
						}
						pending = append(pending, got)
					case ok := <-got:
						if st.waits || !ok {
							t.Fatalf("step %d: %s's acquire did not wait (%v)", i, st.client, ok)
						}
					}
				}
				if got := heldBy(s); got != st.held {
					t.Fatalf("step %d: held %q, want %q", i, got, st.held)
				}
			}
		})
	}
}

// heldBy is "a=6 b=0": the slots each client of s holds.
func heldBy(s *tcpShare) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for a, c := range s.clients {
		parts = append(parts, fmt.Sprintf("%c=%d", a.As4()[3], c.held))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}
