package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// corednsRequestsRe is a series of CoreDNS's request counter with its
// server label in CoreDNS's form for a bound address.
var corednsRequestsRe = regexp.MustCompile(`^coredns_dns_requests_total\{[^}]*server="dns://127\.0\.0\.1:\d+"[^}]*\}$`)

// corednsCounted reports whether m has a series of corednsRequestsRe that
// counted a request.
func corednsCounted(m testkit.Metrics) bool {
	for k, v := range m {
		if corednsRequestsRe.MatchString(k) && v >= 1 {
			return true
		}
	}
	return false
}

// corednsNames reports whether m has a series of CoreDNS's own names.
func corednsNames(m testkit.Metrics) bool {
	for k := range m {
		if strings.HasPrefix(k, "coredns_") {
			return true
		}
	}
	return false
}

// TestServeCoreDNSMetrics: --coredns-metrics adds CoreDNS's names to
// /metrics; without it there are none, and coreDNSMetrics in the config
// file is applied by a reload.
func TestServeCoreDNSMetrics(t *testing.T) {
	ask := func(addr string) {
		t.Helper()
		if _, err := testkit.Exchange("udp", addr, "web.prod.svc.cluster.local.", dns.TypeA); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("flag", func(t *testing.T) {
		addr := startServe(t, "--listen", "127.0.0.1:0", "--objects", "../../examples/objects", "--metrics-listen", "127.0.0.1:0", "--coredns-metrics")
		ask(addr)
		if m := scrape(t, metricsAddr(t)); !corednsCounted(m) {
			t.Errorf("no coredns_dns_requests_total with server dns://127.0.0.1:PORT: %v", m)
		}
	})
	t.Run("reload", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "server.yaml")
		write := func(on bool) {
			t.Helper()
			testkit.WriteAtomic(t, path, exampleConfig(fmt.Sprintf("coreDNSMetrics: %t\n", on)))
		}
		write(false)
		addr := startServe(t, "--listen", "127.0.0.1:0", "--config", path)
		metrics := metricsAddr(t)
		ask(addr)
		if m := scrape(t, metrics); corednsNames(m) {
			t.Fatalf("coreDNSMetrics false: CoreDNS names served: %v", m)
		}
		write(true)
		testkit.WaitFor(t, 15*time.Second, func() error {
			if !corednsCounted(scrape(t, metrics)) {
				return fmt.Errorf("coreDNSMetrics true not applied by the reload")
			}
			return nil
		})
	})
}
