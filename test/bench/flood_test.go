package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/miekg/dns"
)

// floodSockets is how many UDP sockets the flood spreads its queries over;
// each has its own 16-bit ID space, so a flood holds at most
// floodSockets×65536 queries.
const floodSockets = 8

// floodReply is one flood query that got a reply.
type floodReply struct {
	sent  time.Duration // since the flood started
	lat   time.Duration
	rcode int
}

// floodResult is what a flood saw.
type floodResult struct {
	sent    int
	replies []floodReply    // ordered by send time
	lost    []time.Duration // send times of queries never answered
	stray   int64           // replies to no query in flight (duplicates)
}

// flood sends qps queries per second to addr for d, paced by a ticker, the
// n-th for A of name(n), and then waits up to drain for the last replies.
// Every query's send time is kept, per socket and ID.
func flood(addr string, name func(n int) string, qps int, d, drain time.Duration) (floodResult, error) {
	var res floodResult
	if float64(qps)*d.Seconds() > floodSockets*65536 {
		return res, fmt.Errorf("flood: %d qps for %s needs more than %d IDs", qps, d, floodSockets*65536)
	}
	conns := make([]*net.UDPConn, floodSockets)
	for i := range conns {
		raddr, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return res, err
		}
		c, err := net.DialUDP("udp", nil, raddr)
		if err != nil {
			return res, err
		}
		defer c.Close()
		conns[i] = c
	}
	// sentAt[socket][id] is 1 + the send time in ns since start, 0 when
	// no query with that ID is in flight.
	sentAt := make([][65536]atomic.Int64, floodSockets)
	var (
		outstanding atomic.Int64
		sending     atomic.Bool
		allIn       = make(chan struct{})
		allInOnce   sync.Once
		strays      atomic.Int64
	)
	sending.Store(true)
	start := time.Now()
	replies := make([][]floodReply, floodSockets)
	errs := make([]error, floodSockets)
	var readers sync.WaitGroup
	for i, c := range conns {
		readers.Go(func() {
			buf := make([]byte, 2048)
			for {
				n, err := c.Read(buf)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					return
				}
				if err != nil {
					errs[i] = err
					return
				}
				now := time.Since(start)
				if n < 12 {
					strays.Add(1)
					continue
				}
				v := sentAt[i][binary.BigEndian.Uint16(buf)].Swap(0)
				if v == 0 {
					strays.Add(1)
					continue
				}
				sent := time.Duration(v - 1)
				replies[i] = append(replies[i], floodReply{sent: sent, lat: now - sent, rcode: int(buf[3] & 0x0f)})
				if outstanding.Add(-1) == 0 && !sending.Load() {
					allInOnce.Do(func() { close(allIn) })
				}
			}
		})
	}

	tick := time.NewTicker(5 * time.Millisecond)
	maxBurst := max(qps/20, 1) // catch up at most 50 ms of queries per tick
	var sendErr error
	for sendErr == nil {
		elapsed := time.Since(start)
		if elapsed >= d {
			break
		}
		due := int(float64(qps)*elapsed.Seconds()) - res.sent
		for range min(due, maxBurst) {
			sock, id := res.sent%floodSockets, uint16(res.sent/floodSockets)
			m := new(dns.Msg)
			m.SetQuestion(name(res.sent), dns.TypeA)
			m.Id = id
			wire, err := m.Pack()
			if err != nil {
				sendErr = err
				break
			}
			outstanding.Add(1)
			sentAt[sock][id].Store(int64(time.Since(start)) + 1)
			if _, err := conns[sock].Write(wire); err != nil {
				sendErr = err
				break
			}
			res.sent++
		}
		<-tick.C
	}
	tick.Stop()
	sending.Store(false)
	if outstanding.Load() == 0 {
		allInOnce.Do(func() { close(allIn) })
	}
	timer := time.NewTimer(drain)
	select {
	case <-allIn:
	case <-timer.C:
	}
	timer.Stop()
	for _, c := range conns {
		c.SetReadDeadline(time.Now())
	}
	readers.Wait()

	for _, r := range replies {
		res.replies = append(res.replies, r...)
	}
	slices.SortFunc(res.replies, func(a, b floodReply) int { return int(a.sent - b.sent) })
	for i := range sentAt {
		for id := range sentAt[i] {
			if v := sentAt[i][id].Load(); v != 0 {
				res.lost = append(res.lost, time.Duration(v-1))
			}
		}
	}
	slices.Sort(res.lost)
	res.stray = strays.Load()
	return res, errors.Join(append(errs, sendErr)...)
}

// uniqueNames are the flood's names under zone: f0.zone, f1.zone, ...
func uniqueNames(zone string) func(int) string {
	return func(n int) string { return "f" + strconv.Itoa(n) + "." + zone }
}

// probe is one answer (or not) for the in-cluster name.
type probe struct {
	at  time.Duration // since the flood started
	lat time.Duration
	ok  bool // NOERROR with an answer within the timeout
}

// probeLoop asks q of addr every interval, one at a time with timeout,
// until ctx ends.
func probeLoop(ctx context.Context, addr string, q *dns.Msg, start time.Time, interval, timeout time.Duration) ([]probe, error) {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	wire, err := q.Pack()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 2048)
	var out []probe
	id := uint16(0)
	testkit.Every(ctx, interval, func() bool {
		id++
		binary.BigEndian.PutUint16(wire, id)
		sent := time.Now()
		if _, err = conn.Write(wire); err != nil {
			return false
		}
		if err = conn.SetReadDeadline(sent.Add(timeout)); err != nil {
			return false
		}
		p := probe{at: sent.Sub(start), lat: timeout}
		for {
			var n int
			n, err = conn.Read(buf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = nil
				break
			}
			if err != nil {
				return false
			}
			if n < 12 || binary.BigEndian.Uint16(buf) != id {
				continue
			}
			p.lat, p.ok = time.Since(sent), wireOK(buf[:n])
			break
		}
		out = append(out, p)
		return true
	})
	return out, err
}

// sample is the state of a server process at one moment of the flood.
type sample struct {
	at         time.Duration
	goroutines int // -1 when /metrics did not answer
	u          usage
}

// sampleLoop reads go_goroutines and /proc of s every interval until ctx
// ends.
func sampleLoop(ctx context.Context, s *server, start time.Time, interval time.Duration) []sample {
	client := &http.Client{Timeout: interval}
	var out []sample
	testkit.Every(ctx, interval, func() bool {
		smp := sample{at: time.Since(start), goroutines: -1}
		if g, err := goroutines(ctx, client, s.metrics); err == nil {
			smp.goroutines = g
		}
		smp.u, _ = readUsage(s.cmd.Process.Pid)
		out = append(out, smp)
		return true
	})
	return out
}
