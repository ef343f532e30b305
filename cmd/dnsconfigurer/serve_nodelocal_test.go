package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/miekg/dns"
)

// startServe runs serve with args until the test ends and returns its DNS
// address (parsed from its log).
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	addr, _ := startServeLog(t, args...)
	return addr
}

// startServeLog is startServe that also returns the command's log; with
// --config or --metrics-listen it waits for the metrics address too
// (metricsAddr).
func startServeLog(t *testing.T, args ...string) (string, *testkit.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	// No lameduck unless the test asks: stopping would wait 5 s.
	args = append([]string{"--lameduck=0s"}, args...)
	s := goServe(ctx, args)
	t.Cleanup(func() {
		cancel()
		s.wait(t, 10*time.Second)
	})
	joined := strings.Join(args, " ")
	addr, metrics := s.addrs(t, strings.Contains(joined, "--config") || strings.Contains(joined, "--metrics-listen"))
	if m := metricsRe.FindStringSubmatch(s.log.String()); metrics == "" && m != nil {
		metrics = m[1]
	}
	if metrics != "" {
		lastServeMetrics = metrics
	}
	return addr, &s.log
}

// TestServeAutopathChain runs the cluster DNS and the node-local stage as
// the serve command runs them and resolves autopath names through both.
func TestServeAutopathChain(t *testing.T) {
	cluster := startServe(t, "--listen", "127.0.0.1:0", "--objects", "../../examples/objects")
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(resolv, []byte("nameserver 192.0.2.1\nsearch prod.svc.cluster.local\n"), 0o644)
	local := startServe(t, "--mode", "node-local", "--listen", "127.0.0.1:0", "--cluster-upstream", cluster, "--resolv-conf", resolv)

	for _, network := range []string{"udp", "tcp"} {
		for _, addr := range []string{cluster, local} {
			r, err := testkit.Exchange(network, addr, "web.search.prod.cluster.local.ap.k8s.io.", dns.TypeA)
			if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 || r.Answer[0].Header().Rrtype != dns.TypeCNAME ||
				!strings.EqualFold(r.Answer[0].(*dns.CNAME).Target, "web.prod.svc.cluster.local.") {
				t.Fatalf("%s via %s: %v %v", network, addr, r, err)
			}
		}
	}
	// --autopath=false: the name is not ours, and without an upstream it is refused.
	off := startServe(t, "--listen", "127.0.0.1:0", "--objects", "../../examples/objects", "--autopath=false")
	m := new(dns.Msg)
	m.SetQuestion("web.search.prod.cluster.local.ap.k8s.io.", dns.TypeA)
	if r, _, err := new(dns.Client).Exchange(m, off); err != nil || r.Rcode != dns.RcodeRefused {
		t.Fatalf("autopath off: %v %v", r, err)
	}
}

func TestServeNodeLocalFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--mode", "node-local", "--listen", "127.0.0.1:0"},
		{"--mode", "node-local", "--listen", "127.0.0.1:0", "--cluster-upstream", "10.96.0.10", "--objects", "x"},
		{"--mode", "sidecar", "--listen", "127.0.0.1:0"},
		{"--listen", "127.0.0.1:0", "--cluster-upstream", "10.96.0.10"},
		{"--listen", "127.0.0.1:0", "--autopath-option-code", "12"},
		{"--mode", "node-local", "--listen", "127.0.0.1:0", "--cluster-upstream", "10.96.0.10", "--cache-bytes", "0"},
		{"--mode", "node-local", "--listen", "127.0.0.1:5353", "--cluster-upstream", "127.0.0.1:5353"},
	} {
		var stderr testkit.Buffer
		if code := runServe(context.Background(), args, nil, io.Discard, &stderr); code != exitUsage || stderr.String() == "" {
			t.Errorf("%v: exit %d, %q", args, code, stderr.String())
		}
	}
}

// TestServeNodeLocalMetrics: node-local mode's /metrics has the build
// info; --log-format json makes every log line a JSON object.
func TestServeNodeLocalMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	args := []string{"--lameduck=0s", "--mode", "node-local", "--listen", "127.0.0.1:0", "--cluster-upstream", "127.0.0.1:1",
		"--resolv-conf", "", "--metrics-listen", "127.0.0.1:0", "--log-format", "json"}
	s := goServe(ctx, args)
	defer func() {
		cancel()
		if code := s.wait(t, 10*time.Second); code != exitOK {
			t.Errorf("exit %d: %s", code, s.log.String())
		}
	}()
	addr := waitJSONLog(t, s, "serving metrics", "listen")
	wantBuildInfo(t, "serve --mode node-local", scrape(t, addr))
}

// waitJSONLog waits for the JSON log record with message msg and returns
// its attribute key; a line that is not JSON fails the test.
func waitJSONLog(t *testing.T, s *running, msg, key string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(strings.TrimSpace(s.log.String()), "\n") {
			var rec map[string]any
			if line == "" {
				continue
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("log line %q is not JSON: %v", line, err)
			}
			if v, ok := rec[key].(string); ok && rec["msg"] == msg {
				return v
			}
		}
		select {
		case <-s.exited:
			t.Fatalf("serve exited %d: %s", s.code, s.log.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("no %q record with %q within 20s: %s", msg, key, s.log.String())
	return ""
}

// TestServeNodeLocalRefused: node-local's settings that change answers, or
// that it cannot use, are refused at start with an error naming the flag
// or field, never ignored (issue 30 item 3).
func TestServeNodeLocalRefused(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\nforward: [{zone: corp..example, upstreams: [10.0.0.53]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--mode", "node-local", "--listen", "127.0.0.1:0", "--cluster-upstream", "10.96.0.10", "--resolv-conf", ""}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--hosts", "/etc/hosts"}, "--hosts (hosts.file): not used in mode \"node-local\""},
		{[]string{"--forward", "corp.example=10.0.0.53"}, "--forward (forward): not used in mode \"node-local\""},
		{[]string{"--external", "sometimes"}, "--external (nodeLocal.external): \"sometimes\": must be \"cluster\" or \"direct\""},
		{[]string{"--external", "direct"}, "--external (nodeLocal.external): \"direct\" needs nodeLocal.resolvConf"},
		{[]string{"--cluster-config", "cluster.yaml"}, "--cluster-config (nodeLocal.clusterConfig): \"cluster.yaml\": must be an absolute path"},
		{[]string{"--cluster-config", filepath.Join(dir, "missing.yaml")}, "nodeLocal.clusterConfig"},
		{[]string{"--cluster-config", bad}, "forward[0].zone"},
	} {
		var stderr testkit.Buffer
		args := append(slices.Clone(base), tt.args...)
		if code := runServe(context.Background(), append([]string{"--lameduck=0s"}, args...), nil, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tt.args, code, stderr.String(), exitUsage, tt.want)
		}
	}
}
