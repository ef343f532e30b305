package clusterdns_test

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// TestMain fails the run if a test leaves goroutines behind (servers not
// shut down, forwarder exchanges still running).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHTTPEndpoints(t *testing.T) {
	st, _ := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	reg := prometheus.NewRegistry()
	if err := clusterdns.RegisterRecordMetrics(reg, st); err != nil {
		t.Fatal(err)
	}
	h := clusterdns.NewHandler("cluster.local", st)
	srv := httptest.NewServer(health.Handler(reg, health.Condition(h.Synced, "not synced")))
	defer srv.Close()
	if err := testkit.GetOK(nil, srv.URL+"/healthz"); err != nil {
		t.Errorf("/healthz: %v", err)
	}
	if err := testkit.GetOK(nil, srv.URL+"/readyz"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("/readyz before sync: %v, want 503", err)
	}
	st.Publish()
	if err := testkit.GetOK(nil, srv.URL+"/readyz"); err != nil {
		t.Errorf("/readyz after sync: %v, want 200", err)
	}
	if m, err := testkit.Scrape(nil, srv.URL+"/metrics"); err != nil || m["dnsconfigurer_dnsserver_synced"] != 1 {
		t.Errorf("/metrics: synced %v (%v), want 1", m["dnsconfigurer_dnsserver_synced"], err)
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
