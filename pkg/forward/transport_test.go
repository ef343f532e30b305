package forward_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// TestUpstreamTransport: a client's query reaches the upstream over the
// transport the config says, through a real server on 127.0.0.1: UDP for
// a UDP client, TCP for a TCP client, UDP for a TCP client with PreferUDP,
// TCP for every client with ForceTCP.
func TestUpstreamTransport(t *testing.T) {
	up := testkit.NewUpstream(t, answering)
	cases := []struct {
		name   string
		client string
		cfg    forward.Config
		want   []string
	}{
		{"udp client", "udp", forward.Config{}, []string{"udp"}},
		{"tcp client", "tcp", forward.Config{}, []string{"tcp"}},
		{"tcp client prefer_udp", "tcp", forward.Config{PreferUDP: true}, []string{"udp"}},
		{"udp client prefer_udp", "udp", forward.Config{PreferUDP: true}, []string{"udp"}},
		{"udp client force_tcp", "udp", forward.Config{ForceTCP: true}, []string{"tcp"}},
		{"tcp client force_tcp", "tcp", forward.Config{ForceTCP: true}, []string{"tcp"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Upstreams = forward.StaticUpstreams{up.Addr}
			fwd := newForwarder(t, cfg)
			addr := runDNS(t, clusterdns.NewHandler("cluster.local", smallStore(t), clusterdns.WithForwarder(fwd)))
			name := "q" + string(rune('a'+i)) + ".example.org."
			if r := testkit.Ask(t, tc.client, addr, new(dns.Msg).SetQuestion(name, dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				t.Fatalf("%v, want the upstream's answer", r)
			}
			var got []string // the transports of name's queries, in order
			for _, q := range up.Queries() {
				if strings.EqualFold(q.Msg.Question[0].Name, name) {
					got = append(got, q.Net)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("upstream asked over %v, want %v", got, tc.want)
			}
		})
	}
}

// recorder is a slog.Handler that keeps the records.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *recorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recorder) WithGroup(string) slog.Handler            { return h }
func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

// lines returns the records with message msg: their level and the value
// of their "suppressed" attribute, per upstream.
func (h *recorder) lines(msg string) (levels []slog.Level, suppressed map[string][]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	suppressed = map[string][]int64{}
	for _, r := range h.records {
		if r.Message != msg {
			continue
		}
		levels = append(levels, r.Level)
		var up string
		var n int64 = -1
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "upstream":
				up = a.Value.String()
			case "suppressed":
				n = a.Value.Int64()
			}
			return true
		})
		suppressed[up] = append(suppressed[up], n)
	}
	return levels, suppressed
}

// TestForwardErrorLogRateLimit: forward errors are logged at warning
// level, at most one line per upstream per forward.LogEvery; the next line
// after the interval carries the number of lines suppressed. The limiter's
// clock is a fake one the test moves.
func TestForwardErrorLogRateLimit(t *testing.T) {
	// Two closed sockets: a query fails at once (ICMP port unreachable).
	a, b := testkit.RefusedAddr(t), testkit.RefusedAddr(t)
	type step struct {
		advance  time.Duration // the clock moves, then
		failures int           // this many queries fail
	}
	cases := []struct {
		name  string
		ups   []string
		steps []step
		want  map[string][]int64 // per upstream, the suppressed count of each line
	}{
		{"one failure", []string{a}, []step{{0, 1}}, map[string][]int64{a: {0}}},
		{"burst", []string{a}, []step{{0, 50}}, map[string][]int64{a: {0}}},
		{"burst, then less than the interval", []string{a}, []step{{0, 50}, {forward.LogEvery - time.Millisecond, 10}}, map[string][]int64{a: {0}}},
		{"burst, then the interval", []string{a}, []step{{0, 50}, {forward.LogEvery, 1}}, map[string][]int64{a: {0, 49}}},
		{"three intervals", []string{a}, []step{{0, 5}, {forward.LogEvery, 7}, {forward.LogEvery, 1}}, map[string][]int64{a: {0, 4, 6}}},
		{"per upstream", []string{a, b}, []step{{0, 20}}, map[string][]int64{a: {0}, b: {0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams(tc.ups), Policy: forward.PolicySequential,
				MaxFails: forward.NoHealthCheck, Timeout: time.Second, Logger: slog.New(rec)})
			now := time.Unix(1e9, 0)
			forward.SetLogClock(f, func() time.Time { return now })
			q := 0
			for _, s := range tc.steps {
				now = now.Add(s.advance)
				for range s.failures {
					q++
					if _, err := ask(f, context.Background(), "q"+strings.Repeat("x", q%60)+".example.org."); err == nil {
						t.Fatal("a query to closed sockets answered")
					}
				}
			}
			levels, got := rec.lines("forward failed")
			for _, l := range levels {
				if l != slog.LevelWarn {
					t.Errorf("forward error logged at %v, want WARN", l)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("lines per upstream %v, want %v", got, tc.want)
			}
			for up, want := range tc.want {
				if !slices.Equal(got[up], want) {
					t.Errorf("upstream %s: suppressed counts %v, want %v", up, got[up], want)
				}
			}
		})
	}
}
