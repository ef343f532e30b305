package main

import (
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/miekg/dns"
)

// TestServeNamespaceMetrics: by default serve exports the namespace query
// metrics (a lookup of an external name from a pod of prod: three queries
// in the zone, counted in other until the first scrape gives prod a series
// of its own); --namespace-metrics 0 turns them off.
func TestServeNamespaceMetrics(t *testing.T) {
	const series = `dnsconfigurer_dnsserver_namespace_queries_total{namespace="prod"}`
	for _, tc := range []struct {
		name string
		args []string
		on   bool
	}{
		{"default", nil, true},
		{"namespace-metrics 1", []string{"--namespace-metrics", "1"}, true},
		{"namespace-metrics 0", []string{"--namespace-metrics", "0"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := startServeLog(t, append([]string{"--listen", "127.0.0.1:0", "--objects", "../../examples/objects",
				"--metrics-listen", "127.0.0.1:0"}, tc.args...)...)
			metrics := metricsAddr(t)
			ask := func() {
				r, err := testkit.Exchange("udp", addr, "www.example.com.prod.svc.cluster.local.", dns.TypeA)
				if err != nil || r.Rcode != dns.RcodeNameError {
					t.Fatalf("%v %v, want NXDOMAIN", r, err)
				}
			}
			ask()
			first := scrape(t, metrics)
			ask()
			second := scrape(t, metrics)
			switch {
			case !tc.on:
				for k := range first {
					if strings.HasPrefix(k, "dnsconfigurer_dnsserver_namespace_") {
						t.Errorf("namespace metrics exported with --namespace-metrics 0: %s", k)
					}
				}
				if _, ok := second[series]; ok {
					t.Errorf("namespace metrics exported with --namespace-metrics 0: %s after the second lookup", series)
				}
			case first[`dnsconfigurer_dnsserver_namespace_queries_total{namespace="other"}`] != 3 || second[series] != 3:
				t.Errorf("other after the first lookup %v, prod after the second %v; want 3 and 3: %v", first[`dnsconfigurer_dnsserver_namespace_queries_total{namespace="other"}`], second[series], first)
			}
		})
	}
}
