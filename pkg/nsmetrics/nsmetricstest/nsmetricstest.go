// Package nsmetricstest has what the tests of the namespace metrics share,
// in pkg/nsmetrics and in the handlers that count through it: a record
// store with namespaces and Services, and the namespace series as a map.
package nsmetricstest

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// Store is a published store of the cluster zone cluster.local with the
// namespaces, and a ClusterIP Service web in each of the first 100.
func Store(tb testing.TB, namespaces ...string) *store.Store {
	tb.Helper()
	st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		tb.Fatal(err)
	}
	for i, ns := range namespaces {
		st.SetNamespace(store.Namespace{Name: ns})
		if i < 100 {
			st.SetService(store.Service{Namespace: ns, Name: "web", Type: store.ClusterIP,
				ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i), 1})}})
		}
	}
	st.Publish()
	return st
}

// Series gathers reg's namespace families: family → namespace → value.
// A series with a label other than the one "namespace" fails the test.
func Series(tb testing.TB, reg prometheus.Gatherer) map[string]map[string]float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatalf("gather: %v", err)
	}
	out := map[string]map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "dnsconfigurer_dnsserver_namespace_") || mf.GetName() == "dnsconfigurer_dnsserver_namespace_series_changes_total" {
			continue
		}
		m := map[string]float64{}
		for _, s := range mf.GetMetric() {
			if len(s.GetLabel()) != 1 || s.GetLabel()[0].GetName() != "namespace" {
				tb.Fatalf("%s: labels %v", mf.GetName(), s.GetLabel())
			}
			m[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
		}
		out[mf.GetName()] = m
	}
	return out
}
