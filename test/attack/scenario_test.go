package attack

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// maxRate bounds each attack: queries, messages, dials or requests a
// second.
const maxRate = 250

// A shape is a kind of attack: draw picks its parameters.
type shape struct {
	name string
	draw func(r *rand.Rand) params
}

// params is an attack's drawn parameters; run drives it until ctx ends.
type params interface {
	String() string
	run(ctx context.Context, e *env, a *attack)
}

// shapes is every shape a scenario draws from.
var shapes = []shape{
	{"tcp-junk", drawTCPJunk},
	{"tcp-partial", drawTCPPartial},
	{"tcp-held", drawTCPHeld},
	{"tcp-churn", drawTCPChurn},
	{"tcp-pipeline", drawTCPPipeline},
	{"silent-spread", drawSilentSpread},
	{"reverse-zones", drawReverseZones},
	{"external-names", drawExternalNames},
	{"random-qtypes", drawRandomQtypes},
	{"webhook-dup-keys", drawWebhookDupKeys},
	{"webhook-nesting", drawWebhookNesting},
	{"webhook-huge-list", drawWebhookHugeList},
	{"convert-large", drawConvertLarge},
}

// attack is one shape with its parameters and source addresses.
type attack struct {
	shape string
	p     params
	from  []netip.Addr
	seed  uint64 // of the names and bytes it sends
	st    attackStats
}

// rand is the i-th worker's source of names and bytes: the same for a
// seed, whatever the timing.
func (a *attack) rand(i int) *rand.Rand { return rand.New(rand.NewPCG(a.seed, uint64(i))) }

func (a *attack) String() string {
	var from []string
	for _, f := range a.from {
		from = append(from, f.String())
	}
	return fmt.Sprintf("%s: %s; from %s", a.shape, a.p, strings.Join(from, ","))
}

// scenario is what a seed draws: one to three attacks.
type scenario struct {
	seed    uint64
	attacks []*attack
}

// newScenario draws the scenario of seed.
func newScenario(seed uint64) *scenario {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	sc := &scenario{seed: seed}
	for range 1 + r.IntN(3) {
		s := shapes[r.IntN(len(shapes))]
		a := &attack{shape: s.name, p: s.draw(r), seed: r.Uint64()}
		for _, i := range r.Perm(poolSize)[:1+r.IntN(8)] {
			a.from = append(a.from, poolAddr(i))
		}
		slices.SortFunc(a.from, netip.Addr.Compare)
		sc.attacks = append(sc.attacks, a)
	}
	return sc
}

// only reports whether every attack of sc is of one of names.
func (sc *scenario) only(names []string) bool {
	for _, a := range sc.attacks {
		if !slices.Contains(names, a.shape) {
			return false
		}
	}
	return true
}

func (sc *scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d attack(s)", sc.seed, len(sc.attacks))
	for _, a := range sc.attacks {
		fmt.Fprintf(&b, "\n  %s", a)
	}
	return b.String()
}

// report is String with what each attack did.
func (sc *scenario) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d attack(s)", sc.seed, len(sc.attacks))
	for _, a := range sc.attacks {
		fmt.Fprintf(&b, "\n  %s\n    did: %s", a, &a.st)
	}
	return b.String()
}

// shapeNames is the scenario's shapes, for the seeds file.
func (sc *scenario) shapeNames() string {
	var names []string
	for _, a := range sc.attacks {
		names = append(names, a.shape)
	}
	return strings.Join(names, ", ")
}

// attackStats counts what an attack did, for the report.
type attackStats struct {
	sent, failed, dials, closed atomic.Int64

	mu       sync.Mutex
	outcomes map[string]int // webhook statuses, convert exits
	bounds   []string       // bounds the attack saw broken (convert)
}

func (s *attackStats) outcome(o string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.outcomes == nil {
		s.outcomes = map[string]int{}
	}
	s.outcomes[o]++
}

// broken records a bound the attack saw broken; the first few are kept.
func (s *attackStats) broken(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bounds) < 5 {
		s.bounds = append(s.bounds, fmt.Sprintf(format, args...))
	}
}

func (s *attackStats) brokenBounds() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bounds)
}

func (s *attackStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := fmt.Sprintf("%d sent, %d failed, %d dials, %d closed by the server", s.sent.Load(), s.failed.Load(), s.dials.Load(), s.closed.Load())
	var keys []string
	for k := range s.outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out += fmt.Sprintf(", %s %d", k, s.outcomes[k])
	}
	return out
}

// pace hands out rate tokens a second until ctx ends: the pace of an
// attack's dials or sends.
func pace(ctx context.Context, rate int) <-chan struct{} {
	ch := make(chan struct{})
	go testkit.Every(ctx, time.Second/time.Duration(rate), func() bool {
		select {
		case ch <- struct{}{}:
			return true
		case <-ctx.Done():
			return false
		}
	})
	return ch
}

// take waits for a token; false when ctx ended first.
func take(ctx context.Context, tokens <-chan struct{}) bool {
	select {
	case <-tokens:
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// between draws a value in [lo, hi].
func between(r *rand.Rand, lo, hi int) int { return lo + r.IntN(hi-lo+1) }

// pick draws one of xs.
func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// drawTarget draws the DNS server an attack aims at.
func drawTarget(r *rand.Rand) target { return pick(r, toCluster, toNodeLocal) }

// letters is n random lowercase letters.
func letters(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return string(b)
}
