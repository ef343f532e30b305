package forward_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// TestTCPServerClosesAfterQueries: an upstream that ends every TCP
// connection after two queries (our cluster DNS ends them after 128, miekg's
// default) closes the pooled connections at about the same time; a query
// that finds its pooled connection closed is asked again on a new one, not
// on another closed one, so none fails (node-local's fill found 3-14
// SERVFAIL in 100,000 before).
func TestTCPServerClosesAfterQueries(t *testing.T) {
	up := testkit.NewUpstream(t, answering, testkit.Tune(func(s *dns.Server) { s.MaxTCPQueries = 2 }))
	f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, ForceTCP: true, MaxFails: forward.NoHealthCheck})
	var failed atomic.Int32
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				if _, err := ask(f, context.Background(), fmt.Sprintf("q%d-%d.example.org.", w, i)); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of 320 queries failed on connections the upstream had closed", n)
	}
}
