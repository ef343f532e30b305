package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/miekg/dns"
)

// running is a subcommand running in a goroutine.
type running struct {
	name   string         // the subcommand
	log    testkit.Buffer // its stderr
	exited chan struct{}  // closed when the command has returned, code then set
	code   int
}

// goRun runs the subcommand args (its name, then its flags) until ctx
// ends.
func goRun(ctx context.Context, args ...string) *running {
	s := &running{name: args[0], exited: make(chan struct{})}
	go func() {
		s.code = dispatch(ctx, args, nil, io.Discard, &s.log)
		close(s.exited)
	}()
	return s
}

// goServe runs serve with args until ctx ends.
func goServe(ctx context.Context, args []string) *running {
	return goRun(ctx, append([]string{"serve"}, args...)...)
}

// wait waits up to within for the command to return (its context ended)
// and returns its exit code; it fails t, and returns -1, when the command
// runs on.
func (s *running) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-s.exited:
		return s.code
	case <-time.After(within):
		t.Errorf("%s did not stop within %v", s.name, within)
		return -1
	}
}

// addrs waits for the DNS address in the log and, with metrics, for the
// metrics address; serve exiting first fails t.
func (s *running) addrs(t *testing.T, metrics bool) (dnsAddr, metricsAddr string) {
	t.Helper()
	dnsAddr = s.log.WaitMatch(t, 20*time.Second, addrRe, s.exited)[1]
	if metrics {
		metricsAddr = s.log.WaitMatch(t, 20*time.Second, metricsRe, s.exited)[1]
	}
	return dnsAddr, metricsAddr
}

func TestServeFlags(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no listen", []string{"--objects", dir}, exitUsage, "--listen (listen): required"},
		{"bad listen", []string{"--listen", "127.0.0.1", "--objects", dir}, exitUsage, `--listen (listen[0]): "127.0.0.1"`},
		{"objects and kubeconfig", []string{"--listen", "127.0.0.1:0", "--objects", dir, "--kubeconfig", "x"}, exitUsage, "--objects (objects): excludes kubeconfig"},
		{"upstream and resolv.conf", []string{"--listen", "127.0.0.1:0", "--objects", dir, "--upstream", "1.1.1.1", "--upstream-resolv-conf", "/x"}, exitUsage, "exclusive"},
		{"bad pods", []string{"--listen", "127.0.0.1:0", "--objects", dir, "--pods", "maybe"}, exitUsage, `--pods (pods): "maybe"`},
		{"ttl too big", []string{"--listen", "127.0.0.1:0", "--objects", dir, "--ttl", "4000"}, exitUsage, "--ttl (ttl): 4000"},
		{"bad domain", []string{"--listen", "127.0.0.1:0", "--objects", dir, "--cluster-domain", ".."}, exitUsage, `--cluster-domain (clusterDomain): ".." is not a domain such as "cluster.local": has an empty label`},
		{"empty domain", []string{"--listen", "127.0.0.1:0", "--objects", dir, "--cluster-domain", ""}, exitUsage, `--cluster-domain (clusterDomain): empty: want a domain such as "cluster.local"`},
		{"bad upstream", []string{"--listen", "127.0.0.1:0", "--objects", dir, "--upstream", "dns.google"}, exitUsage, `--upstream (forward[0].upstreams[0]): "dns.google"`},
		{"missing resolv.conf", []string{"--listen", "127.0.0.1:0", "--objects", dir, "--upstream-resolv-conf", filepath.Join(dir, "nope")}, exitUsage, "nope"},
		{"missing objects", []string{"--listen", "127.0.0.1:0", "--objects", filepath.Join(dir, "nope")}, exitUsage, "objects: "},
		{"stray argument", []string{"--listen", "127.0.0.1:0", "extra"}, exitUsage, `unexpected argument "extra"`},
		{"no UDP slots", []string{"--listen", "127.0.0.1:0", "--objects", dir, "--max-udp-in-flight", "0"}, exitUsage, "--max-udp-in-flight 0"},
		{"udp sockets out of range", []string{"--listen", "127.0.0.1:0", "--objects", dir, "--udp-sockets", "-1"}, exitUsage, "--udp-sockets (udpSockets): -1: must be between 0 (GOMAXPROCS) and 1024"},
		{"option code 0", []string{"--listen", "127.0.0.1:0", "--objects", dir, "--autopath-option-code", "0"}, exitUsage, "--autopath-option-code 0"},
		{"node-local with objects", []string{"--mode", "node-local", "--listen", "127.0.0.1:0", "--cluster-upstream", "10.0.0.10", "--objects", dir}, exitUsage, "--objects (objects): not used in mode"},
		{"help", []string{"-h"}, exitOK, "--upstream-resolv-conf"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr testkit.Buffer
			// Bounded: a case that is wrongly accepted serves until then.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			code := runServe(ctx, tc.args, nil, io.Discard, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr.String(), tc.code, tc.msg)
			}
		})
	}
}

// TestServeSkipsBadObjects: a manifest object that cannot be served is
// skipped, logged with its file, document and field, and counted; the
// rest is served, a Service named with a digit first included.
func TestServeSkipsBadObjects(t *testing.T) {
	dir := t.TempDir()
	manifest := "apiVersion: v1\nkind: Service\nmetadata: {name: 1kubernetes, namespace: a}\nspec: {clusterIP: 10.0.0.1}\n" +
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: a}\nspec: {clusterIP: 10.0.0.300}\n"
	if err := os.WriteFile(filepath.Join(dir, "svc.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := goServe(ctx, []string{"--lameduck=0s", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--objects", dir})
	addr, metrics := s.addrs(t, true)
	if r, err := testkit.Exchange("udp", addr, "1kubernetes.a.svc.cluster.local.", dns.TypeA); err != nil || len(r.Answer) != 1 {
		t.Fatalf("1kubernetes: %v %v", r, err)
	}
	if r, err := testkit.Exchange("udp", addr, "s.a.svc.cluster.local.", dns.TypeA); err != nil || r.Rcode != dns.RcodeNameError {
		t.Fatalf("the skipped Service: %v %v, want NXDOMAIN", r, err)
	}
	testkit.WantSubstrings(t, "serve's log", s.log.String(), "skipping a manifest object", "svc.yaml", "document=2", `spec.clusterIP[0] \"10.0.0.300\"`)
	series := `dnsconfigurer_dnsserver_objects_skipped_total{kind="service",reason="invalid-field"}`
	if got := scrape(t, metrics)[series]; got != 1 {
		t.Errorf("%s = %v, want 1", series, got)
	}
	cancel()
	if code := s.wait(t, 10*time.Second); code != exitOK {
		t.Fatalf("exit %d: %s", code, s.log.String())
	}
}

var addrRe = regexp.MustCompile(`msg="serving DNS".*listen=\[([0-9.:]+)\]`)
var metricsRe = regexp.MustCompile(`msg="serving metrics".*listen=([0-9.:]+)`)

// TestServeRuns starts the command on the example manifests, queries it over
// UDP and TCP, checks /readyz and /metrics, and stops it with the context.
func TestServeRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := []string{"--listen", "127.0.0.1:0", "--objects", "../../examples/objects", "--pods", "insecure",
		"--ttl", "7", "--metrics-listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--lameduck", "2s"}
	s := goServe(ctx, args)
	addr, metrics := s.addrs(t, true)
	for _, network := range []string{"udp", "tcp"} {
		r, err := testkit.Exchange(network, addr, "web.prod.svc.cluster.local.", dns.TypeA)
		if err != nil || len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 7 {
			t.Fatalf("%s: %v %v", network, r, err)
		}
		if r, err = testkit.Exchange(network, addr, "10-9-9-9.prod.pod.cluster.local.", dns.TypeA); err != nil || len(r.Answer) != 1 {
			t.Fatalf("%s insecure pod: %v %v", network, r, err)
		}
	}
	if err := testkit.GetOK(nil, "http://"+metrics+"/readyz"); err != nil {
		t.Fatal(err)
	}
	page := scrape(t, metrics)
	for series, want := range map[string]float64{
		`dnsconfigurer_dnsserver_requests_total{family="1",proto="udp",server="cluster",type="A",zone="cluster.local."}`: 2,
		`dnsconfigurer_dnsserver_requests_total{family="1",proto="tcp",server="cluster",type="A",zone="cluster.local."}`: 2,
		`dnsconfigurer_dnsserver_responses_total{rcode="NOERROR",server="cluster",zone="cluster.local."}`:                4,
	} {
		if got, ok := page[series]; !ok || got != want {
			t.Errorf("/metrics: %s = %v (present %v), want %v: %v", series, got, ok, want, page)
		}
	}
	if !page.Has("dnsconfigurer_forward_in_flight") {
		t.Errorf("/metrics lacks the forwarder's metrics: %v", page)
	}
	wantBuildInfo(t, "serve", page)
	// Lameduck: after the signal /readyz fails while names still answer.
	cancel()
	for {
		resp, err := http.Get("http://" + metrics + "/readyz")
		if err != nil {
			t.Fatalf("/readyz in lameduck: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		select {
		case <-s.exited:
			t.Fatalf("serve exited %d without a lameduck", s.code)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if r, err := testkit.Exchange("udp", addr, "web.prod.svc.cluster.local.", dns.TypeA); err != nil || len(r.Answer) != 1 {
		t.Fatalf("query in lameduck: %v %v", r, err)
	}
	if code := s.wait(t, 10*time.Second); code != exitOK {
		t.Fatalf("exit %d after cancel and its lameduck: %s", code, s.log.String())
	}
}

// TestServeUpstreamResolvConf forwards through the nameservers of a watched
// resolv.conf, and drops the server's own address from them.
func TestServeUpstreamResolvConf(t *testing.T) {
	dir := t.TempDir()
	rc := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(rc, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The only upstream is 127.0.0.1:53; listening on 127.0.0.1:53 is not
	// possible in tests, so listen elsewhere and check the forwarder keeps
	// it (a SERVFAIL from an unreachable upstream, not REFUSED).
	s := goServe(ctx, []string{"--lameduck=0s", "--listen", "127.0.0.1:0", "--objects", "../../examples/objects", "--upstream-resolv-conf", rc})
	addr, _ := s.addrs(t, false)
	if r, err := testkit.Exchange("udp", addr, "web.prod.svc.cluster.local.", dns.TypeA); err != nil || len(r.Answer) != 1 {
		t.Fatalf("in-zone: %v %v", r, err)
	}
	r, err := testkit.Exchange("udp", addr, "example.invalid.", dns.TypeA)
	if err != nil || r.Rcode == dns.RcodeRefused {
		t.Fatalf("outside name: %v %v (want it forwarded)", r, err)
	}
	cancel()
	if code := s.wait(t, 10*time.Second); code != exitOK {
		t.Fatalf("exit %d: %s", code, s.log.String())
	}
}
