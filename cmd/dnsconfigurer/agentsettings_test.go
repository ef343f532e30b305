package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
)

// TestNodeSettings gets /node-settings from an agent's metrics handler:
// the JSON shape (field names), the config, and the host snapshot after
// the node's resolver file changes; the health paths are still served.
func TestNodeSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte("nameserver 192.0.2.1\nsearch corp.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := hostresolv.Watch(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	ndots := 2
	node := v1alpha1.NodeDNS{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", NodeOS: "linux"}
	pp := v1alpha1.PodPolicy{DefaultDNSPolicy: v1alpha1.DNSPolicyClusterFirstWithAutopath, NamespaceLabels: true, Ndots: &ndots}
	srv := httptest.NewServer(agentHandler(nil, agentSettings(nodesettings.KindShim, "node-a", node, pp, nil, v1alpha1.LimitsTrim, w)))
	defer srv.Close()

	raw := getJSON(t, srv.URL+nodesettings.Path)
	for _, k := range []string{"kind", "version", "nodeName", "clusterDNS", "clusterDomain", "nodeLocalDNS", "nodeOS", "limits", "podPolicy", "host"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("no %q in %v", k, raw)
		}
	}
	wantPolicy := map[string]any{"defaultDNSPolicy": "ClusterFirstWithAutopath", "namespaceLabels": true, "ndots": 2.0}
	if !reflect.DeepEqual(raw["podPolicy"], wantPolicy) {
		t.Errorf("podPolicy = %v, want %v", raw["podPolicy"], wantPolicy)
	}
	s := getSettings(t, srv.URL)
	if s.Kind != "shim" || s.NodeName != "node-a" || s.Host.Path != path || !s.Host.Healthy || s.Host.Generation != 1 ||
		!reflect.DeepEqual(s.Host.Nameservers, []string{"192.0.2.1"}) || !reflect.DeepEqual(s.NodeLocalDNS, []string{}) {
		t.Errorf("settings = %+v", s)
	}

	ch, unsub := w.Subscribe()
	defer unsub()
	if err := os.WriteFile(path, []byte("nameserver 192.0.2.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for w.Current().Generation < 2 {
		select {
		case <-ch:
		case <-timeout:
			t.Fatal("the watcher published no new snapshot within 10s")
		}
	}
	s = getSettings(t, srv.URL)
	if s.Host.Generation < 2 || !reflect.DeepEqual(s.Host.Nameservers, []string{"192.0.2.2"}) || len(s.Host.Searches) != 0 {
		t.Errorf("after the change: host = %+v", s.Host)
	}
	if resp, err := http.Get(srv.URL + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %v %v", resp, err)
	}
}

func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func getSettings(t *testing.T, base string) nodesettings.Settings {
	t.Helper()
	resp, err := http.Get(base + nodesettings.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s nodesettings.Settings
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
