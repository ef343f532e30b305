package bench

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// loadResult is what a closed-loop run saw.
type loadResult struct {
	answered int64           // replies the check accepted
	bad      int64           // replies it did not (wrong rcode, no answer)
	timeouts int64           // queries without a reply within the timeout
	lat      []time.Duration // latency of every reply, sorted
	window   time.Duration
}

func (r loadResult) qps() float64 { return float64(r.answered) / r.window.Seconds() }

// percentile of sorted latencies, p in [0,1]; 0 for none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

// wireOK accepts a reply with rcode NOERROR and at least one answer
// record, read from the header alone so that the generator spends its CPU
// on sending (callers match the ID).
func wireOK(b []byte) bool {
	return len(b) >= 12 && b[3]&0x0f == dns.RcodeSuccess && binary.BigEndian.Uint16(b[6:8]) > 0
}

// closedLoop sends query to addr from senders goroutines, each with its own
// UDP socket and one query in flight, for d; a query without a reply within
// timeout counts as a timeout and the sender goes on. Queries are the
// pre-packed bytes with a fresh ID each.
func closedLoop(addr string, query []byte, senders int, d, timeout time.Duration) (loadResult, error) {
	type part struct {
		answered, bad, timeouts int64
		lat                     []time.Duration
		err                     error
	}
	parts := make([]part, senders)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := range senders {
		wg.Go(func() {
			p := &parts[w]
			conn, err := net.Dial("udp", addr)
			if err != nil {
				p.err = err
				return
			}
			defer conn.Close()
			q := slices.Clone(query)
			buf := make([]byte, 2048)
			p.lat = make([]time.Duration, 0, 1<<16)
			id := uint16(w << 11)
			for time.Now().Before(end) {
				id++
				binary.BigEndian.PutUint16(q, id)
				sent := time.Now()
				if _, err := conn.Write(q); err != nil {
					p.err = err
					return
				}
				if err := conn.SetReadDeadline(sent.Add(timeout)); err != nil {
					p.err = err
					return
				}
				for {
					n, err := conn.Read(buf)
					if errors.Is(err, os.ErrDeadlineExceeded) {
						p.timeouts++
						break
					}
					if err != nil {
						p.err = err
						return
					}
					if n < 12 || binary.BigEndian.Uint16(buf) != id {
						continue // a late reply to a query that timed out
					}
					p.lat = append(p.lat, time.Since(sent))
					if wireOK(buf[:n]) {
						p.answered++
					} else {
						p.bad++
					}
					break
				}
			}
		})
	}
	wg.Wait()
	r := loadResult{window: d}
	var errs []error
	for _, p := range parts {
		r.answered += p.answered
		r.bad += p.bad
		r.timeouts += p.timeouts
		r.lat = append(r.lat, p.lat...)
		errs = append(errs, p.err)
	}
	slices.Sort(r.lat)
	return r, errors.Join(errs...)
}
