package nodelocal

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// flaky answers SOA questions with SERVFAIL, or an error, for its first
// fails calls, then with NOERROR.
type flaky struct {
	fails int32
	err   bool
	calls atomic.Int32
}

func (f *flaky) Exchange(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
	n := f.calls.Add(1)
	if n <= f.fails {
		if f.err {
			return nil, errors.New("dial tcp 10.96.0.11:53: connect: connection refused")
		}
		return new(dns.Msg).SetRcode(m, dns.RcodeServerFailure), nil
	}
	return new(dns.Msg).SetReply(m), nil
}

// TestWaitCluster: a starting stage asks the cluster DNS until it answers,
// and gives up at the bound.
func TestWaitCluster(t *testing.T) {
	for _, tc := range []struct {
		name      string
		up        *flaky
		wait      time.Duration
		wantCalls func(int32) bool
	}{
		{"answers at once", &flaky{}, time.Minute, func(n int32) bool { return n == 1 }},
		{"SERVFAIL twice", &flaky{fails: 2}, time.Minute, func(n int32) bool { return n == 3 }},
		{"no endpoint three times", &flaky{fails: 3, err: true}, time.Minute, func(n int32) bool { return n == 4 }},
		{"never: the bound", &flaky{fails: 1 << 30}, 300 * time.Millisecond, func(n int32) bool { return n >= 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waitCluster(context.Background(), tc.up, "cluster.local", tc.wait, slog.New(slog.DiscardHandler))
			if n := tc.up.calls.Load(); !tc.wantCalls(n) {
				t.Errorf("%d questions to the cluster DNS", n)
			}
		})
	}
}
