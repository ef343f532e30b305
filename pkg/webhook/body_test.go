package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// deadlines records the read deadlines a bodyReader sets.
type deadlines struct {
	mu   sync.Mutex
	list []time.Time
}

func (d *deadlines) SetReadDeadline(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.list = append(d.list, t)
	return nil
}

func (d *deadlines) all() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.list...)
}

// sender hands out a body chunk bytes a Read, checking before each one
// that the budget holds no more than the reader may (at most twice what was
// sent, at least minBodyBuffer, never over declared).
type sender struct {
	t        *testing.T
	body     []byte
	chunk    int
	budget   *byteBudget
	declared int64
	clock    *testkit.Clock
	step     time.Duration // the clock moves this much a Read
	sent     int
	peak     int64
}

func (s *sender) Read(p []byte) (int, error) {
	held := s.budget.inUse()
	s.peak = max(s.peak, held)
	if limit := max(2*int64(s.sent), minBodyBuffer); held > limit {
		s.t.Errorf("after %d bytes sent the body holds %d of the budget, over %d", s.sent, held, limit)
	}
	if s.declared >= 0 && held > max(s.declared, 0) {
		s.t.Errorf("the body holds %d of the budget, over its declared %d", held, s.declared)
	}
	if s.clock != nil {
		s.clock.Advance(s.step)
	}
	if s.sent == len(s.body) {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), s.chunk)], s.body[s.sent:])
	s.sent += n
	return n, nil
}

// TestBodyReader: a body is read whole into one buffer whose bytes come from
// the budget as they arrive, and a body over the cap or longer than its
// Content-Length is refused.
func TestBodyReader(t *testing.T) {
	body := func(n int) []byte { return bytes.Repeat([]byte("x"), n) }
	cases := []struct {
		name     string
		body     []byte
		declared int64 // -1: no Content-Length
		limit    int64
		chunk    int
		err      string // "" for none
		held     int64  // at the end
	}{
		{name: "typical review with a length", body: body(3000), declared: 3000, limit: 1 << 20, chunk: 1000, held: 3000},
		{name: "typical review without a length", body: body(3000), declared: -1, limit: 1 << 20, chunk: 1000, held: 4096},
		{name: "one byte at a time", body: body(2000), declared: 2000, limit: 1 << 20, chunk: 1, held: 2000},
		{name: "large body in large reads", body: body(1 << 20), declared: 1 << 20, limit: 1 << 20, chunk: 32 << 10, held: 1 << 20},
		{name: "empty", body: nil, declared: 0, limit: 1 << 20, chunk: 1000, held: 0},
		{name: "exactly the cap without a length", body: body(4096), declared: -1, limit: 4096, chunk: 1000, held: 4096},
		{name: "over the cap without a length", body: body(4097), declared: -1, limit: 4096, chunk: 1000,
			err: "the request body is over the limit of 4096 bytes", held: 4096},
		{name: "longer than its length", body: body(3001), declared: 3000, limit: 1 << 20, chunk: 1000,
			err: "the request body is longer than its Content-Length of 3000 bytes", held: 3000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			budget := newByteBudget(2 << 20)
			s := &sender{t: t, body: tc.body, chunk: tc.chunk, budget: budget, declared: tc.declared}
			rules := bodyRules{limit: tc.limit, queue: time.Second, progress: time.Minute, read: time.Minute}
			b := newBodyReader(s, tc.declared, budget, rules, &deadlines{})
			err := b.read(context.Background())
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || err.Error() != tc.err) {
				t.Fatalf("read: %v, want %q", err, tc.err)
			}
			if tc.err == "" && !bytes.Equal(b.buf, tc.body) {
				t.Errorf("read %d bytes, want the %d sent", len(b.buf), len(tc.body))
			}
			if b.held != tc.held || budget.inUse() != tc.held {
				t.Errorf("holds %d (budget in use %d), want %d", b.held, budget.inUse(), tc.held)
			}
			budget.release(b.held)
		})
	}
}

// TestBodyDeadlines: each 64 KiB of a body gets the progress timeout, never
// past the whole body's read timeout, and decoding gets the rest of the
// read timeout.
func TestBodyDeadlines(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	cases := []struct {
		name     string
		size     int
		chunk    int
		step     time.Duration // time each Read takes
		progress time.Duration
		read     time.Duration
		want     []time.Time
	}{
		// At most 16 KiB a Read, 100 ms each, into a buffer that doubles
		// from 512 bytes: 64 KiB have arrived after the 9th read (900 ms),
		// 128 KiB after the 13th (1300 ms).
		{name: "each quantum gets the progress timeout", size: 160 << 10, chunk: 16 << 10, step: 100 * time.Millisecond,
			progress: 2 * time.Second, read: 10 * time.Second,
			want: []time.Time{at(2 * time.Second), at(2900 * time.Millisecond), at(3300 * time.Millisecond), at(10 * time.Second)}},
		{name: "capped by the read timeout", size: 160 << 10, chunk: 16 << 10, step: 100 * time.Millisecond,
			progress: 2 * time.Second, read: 2500 * time.Millisecond,
			want: []time.Time{at(2 * time.Second), at(2500 * time.Millisecond), at(2500 * time.Millisecond), at(2500 * time.Millisecond)}},
		{name: "a short body has one quantum", size: 3000, chunk: 1000, step: 10 * time.Millisecond,
			progress: 2 * time.Second, read: 10 * time.Second,
			want: []time.Time{at(2 * time.Second), at(10 * time.Second)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := testkit.NewClock(start)
			budget := newByteBudget(1 << 20)
			s := &sender{t: t, body: bytes.Repeat([]byte("x"), tc.size), chunk: tc.chunk, budget: budget, declared: int64(tc.size), clock: clock, step: tc.step}
			dl := &deadlines{}
			b := newBodyReader(s, int64(tc.size), budget, bodyRules{limit: 1 << 20, queue: time.Second, progress: tc.progress, read: tc.read}, dl)
			b.now = clock.Now
			if err := b.read(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := dl.all(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("deadlines\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

// TestBodyBudgetWait: a body that waits for budget waits at most the queue
// time in all (then errBudgetWait); while it waits its deadline is the whole
// body's, and the wait moves its progress deadline by as much.
func TestBodyBudgetWait(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rules := bodyRules{limit: 1 << 20, queue: 300 * time.Millisecond, progress: 2 * time.Second, read: 10 * time.Second}

	t.Run("granted", func(t *testing.T) {
		clock := testkit.NewClock(start)
		budget := newByteBudget(1 << 20)
		budget.tryAcquire(1 << 20) // spent: the first 512 bytes wait
		dl := &deadlines{}
		b := newBodyReader(strings.NewReader("{}"), 2, budget, bodyRules{limit: 1 << 20, queue: time.Minute, progress: 2 * time.Second, read: 10 * time.Second}, dl)
		b.now = clock.Now
		done := make(chan error, 1)
		go func() { done <- b.read(context.Background()) }()
		testkit.WaitEqual(t, 10*time.Second, "the body waiting for budget", func() bool { return budget.waiterCount() == 1 }, true)
		clock.Advance(500 * time.Millisecond)
		budget.release(1 << 20)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want := []time.Time{start.Add(2 * time.Second), start.Add(10 * time.Second), start.Add(2500 * time.Millisecond), start.Add(10 * time.Second)}
		if got := dl.all(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("deadlines\n%v\nwant\n%v", got, want)
		}
		if string(b.buf) != "{}" || b.held != 2 {
			t.Errorf("read %q holding %d", b.buf, b.held)
		}
	})
	t.Run("queue time spent", func(t *testing.T) {
		budget := newByteBudget(1 << 20)
		budget.tryAcquire(1 << 20)
		b := newBodyReader(strings.NewReader("{}"), 2, budget, rules, &deadlines{})
		began := time.Now()
		err := b.read(context.Background())
		if !errors.Is(err, errBudgetWait) {
			t.Fatalf("read: %v, want errBudgetWait", err)
		}
		if waited := time.Since(began); waited < rules.queue {
			t.Errorf("refused after %v, want after the queue time %v", waited, rules.queue)
		}
		if b.held != 0 || budget.waiterCount() != 0 {
			t.Errorf("holds %d, %d waiters left", b.held, budget.waiterCount())
		}
	})
	t.Run("client gone", func(t *testing.T) {
		budget := newByteBudget(1 << 20)
		budget.tryAcquire(1 << 20)
		ctx, cancel := context.WithCancel(context.Background())
		b := newBodyReader(strings.NewReader("{}"), 2, budget, bodyRules{limit: 1 << 20, queue: time.Minute, progress: time.Minute, read: time.Minute}, &deadlines{})
		done := make(chan error, 1)
		go func() { done <- b.read(ctx) }()
		testkit.WaitEqual(t, 10*time.Second, "the body waiting for budget", func() bool { return budget.waiterCount() == 1 }, true)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) || errors.Is(err, errBudgetWait) {
			t.Fatalf("read: %v, want the cancellation, not a budget refusal", err)
		}
	})
}

// timeoutReader fails as a connection past its read deadline does.
type timeoutReader struct{ sent bool }

func (r *timeoutReader) Read(p []byte) (int, error) {
	if !r.sent {
		r.sent = true
		return copy(p, "{\"apiVersion\""), nil
	}
	return 0, fmt.Errorf("read tcp 127.0.0.1:8443->127.0.0.1:5555: %w", os.ErrDeadlineExceeded)
}

// TestBodySlow: a read past the deadline is errBodySlow, saying what
// arrived and the rule.
func TestBodySlow(t *testing.T) {
	budget := newByteBudget(1 << 20)
	b := newBodyReader(&timeoutReader{}, 6<<20, budget, bodyRules{limit: 6 << 20, queue: time.Second, progress: 2 * time.Second, read: 10 * time.Second}, &deadlines{})
	err := b.read(context.Background())
	if !errors.Is(err, errBodySlow) {
		t.Fatalf("read: %v, want errBodySlow", err)
	}
	for _, want := range []string{"the request body is too slow: 13 bytes arrived in", "each 64 KiB must arrive within 2s and the whole body within 10s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want it to contain %q", err, want)
		}
	}
	if b.held != minBodyBuffer {
		t.Errorf("holds %d after 13 bytes, want %d", b.held, minBodyBuffer)
	}
}
