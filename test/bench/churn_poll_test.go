package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// The kinds of change the churn writes.
const (
	kindService  = "new Service"
	kindEndpoint = "moved endpoint"
)

const (
	// pollTimeout is how long one poll waits for its reply.
	pollTimeout = time.Second
	// maxWritesInFlight bounds the churn's API writes in flight per kind;
	// when the API server is slower, the churn falls behind its rate (the
	// report gives the rate reached).
	maxWritesInFlight = 32
	// writeTimeout bounds one churn write.
	writeTimeout = 30 * time.Second
)

// change is one write of the churn and what the servers must answer
// after it.
type change struct {
	kind string
	expect
	written time.Time // when the API server acknowledged the write
	done    func()    // when set, called once every server has been polled
}

// pollResult is one server's answer to one change.
type pollResult struct {
	kind  string
	ok    bool          // answered within the bound
	lat   time.Duration // write acknowledged → first right answer
	polls int           // queries asked
	last  string        // why the last reply was not right, for misses
}

// pollInterval paces the polls of a change: an eighth of the time since
// the write, from 250 µs to 10 ms, so a latency is measured within 12.5 %
// (or 10 ms) without thousands of queries for a slow one.
func pollInterval(sinceWrite time.Duration) time.Duration {
	return min(max(sinceWrite/8, 250*time.Microsecond), 10*time.Millisecond)
}

// prober asks one server A questions over a UDP socket of its own, with
// EDNS0 (4096 bytes) so that 50 A records fit.
type prober struct {
	conn net.Conn
	buf  []byte
	id   uint16
}

func newProber(addr string) (*prober, error) {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return nil, err
	}
	return &prober{conn: conn, buf: make([]byte, 65535)}, nil
}

func (p *prober) close() { p.conn.Close() }

// ask sends one question for e.qname and checks the reply against e.
func (p *prober) ask(e expect, timeout time.Duration) error {
	p.id++
	q := new(dns.Msg)
	q.SetQuestion(e.qname, dns.TypeA)
	q.SetEdns0(4096, false)
	q.Id = p.id
	wire, err := q.Pack()
	if err != nil {
		return err
	}
	if err := p.conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := p.conn.Write(wire); err != nil {
		return err
	}
	for {
		n, err := p.conn.Read(p.buf)
		if err != nil {
			return err // a timeout wraps os.ErrDeadlineExceeded
		}
		r := new(dns.Msg)
		if r.Unpack(p.buf[:n]) != nil || r.Id != p.id {
			continue // a late reply to an earlier question
		}
		return e.check(r)
	}
}

// check accepts a reply that is NOERROR, not truncated, and whose A
// records for the name are exactly e.want.
func (e expect) check(r *dns.Msg) error {
	if r.Rcode != dns.RcodeSuccess {
		return fmt.Errorf("rcode %s", dns.RcodeToString[r.Rcode])
	}
	if r.Truncated {
		return errors.New("truncated")
	}
	var got []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && strings.EqualFold(a.Hdr.Name, e.qname) {
			got = append(got, a.A.String())
		}
	}
	slices.Sort(got)
	if slices.Equal(got, e.want) {
		return nil
	}
	var missing, extra []string
	for _, w := range e.want {
		if _, found := slices.BinarySearch(got, w); !found {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if _, found := slices.BinarySearch(e.want, g); !found {
			extra = append(extra, g)
		}
	}
	return fmt.Errorf("%d A records, want %d: missing %s, extra %s", len(got), len(e.want), short(missing), short(extra))
}

// short lists up to three addresses.
func short(a []string) string {
	if len(a) > 3 {
		return fmt.Sprintf("[%s … %d more]", strings.Join(a[:3], " "), len(a)-3)
	}
	return "[" + strings.Join(a, " ") + "]"
}

// pollChange asks addr about ch, paced by pollInterval, until the answer
// is right or bound has passed since the write.
func pollChange(addr string, ch change, bound time.Duration) pollResult {
	r := pollResult{kind: ch.kind}
	p, err := newProber(addr)
	if err != nil {
		r.last = err.Error()
		return r
	}
	defer p.close()
	deadline := ch.written.Add(bound)
	for {
		r.polls++
		timeout := min(pollTimeout, max(time.Until(deadline), 20*time.Millisecond))
		err := p.ask(ch.expect, timeout)
		now := time.Now()
		// A last poll cut short by the bound keeps the earlier reply's reason.
		switch {
		case err == nil:
			r.ok, r.lat = true, now.Sub(ch.written)
			return r
		case !errors.Is(err, os.ErrDeadlineExceeded):
			r.last = err.Error()
		case timeout == pollTimeout || r.last == "":
			r.last = "no reply within " + timeout.String()
		}
		if !now.Before(deadline) {
			return r
		}
		wait := time.NewTimer(min(pollInterval(now.Sub(ch.written)), deadline.Sub(now)))
		<-wait.C
	}
}

// driveResult is one churn phase.
type driveResult struct {
	writes    int
	dropped   int // ticks whose lane had maxWritesInFlight writes in flight
	writeErrs []error
	took      time.Duration  // the first tick to the end of the last write
	polls     [][]pollResult // per server address
}

// writeFunc makes one change through the API server.
type writeFunc func(ctx context.Context) (change, error)

// drive writes rate changes per second until ctx ends, the ticks taking
// the lanes in turn, and polls every server for every change written. A
// lane has at most maxWritesInFlight writes in flight; a tick that finds
// its lane full is dropped, so a slow kind of write does not hold back
// the others. drive returns once every poll has ended.
func drive(ctx context.Context, rate int, lanes []writeFunc, addrs []string, bound time.Duration) driveResult {
	res := driveResult{polls: make([][]pollResult, len(addrs))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	inFlight := make([]chan struct{}, len(lanes))
	for i := range inFlight {
		inFlight[i] = make(chan struct{}, maxWritesInFlight)
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	start := time.Now()
	var lastWrite time.Time
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			if !lastWrite.IsZero() {
				res.took = lastWrite.Sub(start)
			}
			return res
		case <-tick.C:
		}
		lane := n % len(lanes)
		select {
		case inFlight[lane] <- struct{}{}:
		default:
			res.dropped++
			continue
		}
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
			ch, err := lanes[lane](wctx)
			cancel()
			<-inFlight[lane]
			if err != nil {
				mu.Lock()
				res.writeErrs = append(res.writeErrs, err)
				mu.Unlock()
				return
			}
			results := make([]pollResult, len(addrs))
			var pw sync.WaitGroup
			for i, a := range addrs {
				pw.Go(func() { results[i] = pollChange(a, ch, bound) })
			}
			pw.Wait()
			if ch.done != nil {
				ch.done()
			}
			mu.Lock()
			defer mu.Unlock()
			res.writes++
			if ch.written.After(lastWrite) {
				lastWrite = ch.written
			}
			for i, r := range results {
				res.polls[i] = append(res.polls[i], r)
			}
		})
	}
}
