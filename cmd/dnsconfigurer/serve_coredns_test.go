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
var corednsRequestsRe = regexp.MustCompile(`(?m)^coredns_dns_requests_total\{[^}]*server="dns://127\.0\.0\.1:\d+"[^}]*\} [1-9]`)

// TestServeCoreDNSMetrics: --coredns-metrics adds CoreDNS's names to
// /metrics; without it there are none, and coreDNSMetrics in the config
// file is applied by a reload.
func TestServeCoreDNSMetrics(t *testing.T) {
	ask := func(addr string) {
		t.Helper()
		if _, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(new(dns.Msg).SetQuestion("web.prod.svc.cluster.local.", dns.TypeA), addr); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("flag", func(t *testing.T) {
		addr := startServe(t, "--listen", "127.0.0.1:0", "--objects", "../../examples/objects", "--metrics-listen", "127.0.0.1:0", "--coredns-metrics")
		ask(addr)
		if page := scrape(t, metricsAddr(t)); !corednsRequestsRe.MatchString(page) {
			t.Errorf("no coredns_dns_requests_total with server dns://127.0.0.1:PORT:\n%s", page)
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
		if page := scrape(t, metrics); strings.Contains(page, "coredns_") {
			t.Fatalf("coreDNSMetrics false: CoreDNS names served:\n%s", page)
		}
		write(true)
		testkit.WaitFor(t, 15*time.Second, func() error {
			if page := scrape(t, metrics); !corednsRequestsRe.MatchString(page) {
				return fmt.Errorf("coreDNSMetrics true not applied by the reload")
			}
			return nil
		})
	})
}
