package clusterdns_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store"
)

// TestMain fails the run if a test leaves goroutines behind (servers not
// shut down, forwarder exchanges still running).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type int64Counter struct{ n atomic.Int64 }

func (c *int64Counter) add()       { c.n.Add(1) }
func (c *int64Counter) get() int64 { return c.n.Load() }

func TestHTTPEndpoints(t *testing.T) {
	st, _ := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	reg := prometheus.NewRegistry()
	if err := clusterdns.RegisterRecordMetrics(reg, st); err != nil {
		t.Fatal(err)
	}
	h := clusterdns.NewHandler("cluster.local", st)
	srv := httptest.NewServer(health.Handler(reg, health.Condition(h.Synced, "not synced")))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = fmt.Fprint(&b, resp.Header.Get("Content-Type"))
		buf := make([]byte, 1<<16)
		n, _ := resp.Body.Read(buf)
		return resp.StatusCode, string(buf[:n])
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d", code)
	}
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before sync = %d, want 503", code)
	}
	st.Publish()
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after sync = %d, want 200", code)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "dnsconfigurer_dnsserver_synced 1") {
		t.Errorf("/metrics = %d %q", code, body)
	}
}

type netipAddr = netip.Addr

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
