package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/miekg/dns"
)

// exampleConfig is a ServerConfiguration serving the example objects, with
// metrics on a free port, and more of its YAML.
func exampleConfig(more string) string {
	return "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\nobjects: ../../examples/objects\nmetricsListen: 127.0.0.1:0\n" + more
}

// TestServeConfigReload: serve --config forwards as the file says; a
// changed file is applied while the server runs (the new upstream answers,
// nothing is dropped meanwhile, the new ttl is served), and a broken file
// keeps the running config and is counted.
func TestServeConfigReload(t *testing.T) {
	upA := stubUpstream(t, 300, "192.0.2.1").Addr
	upB := stubUpstream(t, 300, "192.0.2.2").Addr
	dir := t.TempDir()
	path := filepath.Join(dir, "server.yaml")
	write := func(body string) {
		t.Helper()
		testkit.WriteAtomic(t, path, body)
	}
	config := func(up string, ttl int) string {
		return exampleConfig(fmt.Sprintf("ttl: %d\nforward:\n- zone: .\n  upstreams: [%q]\n", ttl, up))
	}
	write(config(upA, 7))
	addr := startServe(t, "--listen", "127.0.0.1:0", "--config", path)
	external := func() string {
		t.Helper()
		r, err := testkit.Exchange("udp", addr, "www.example.org.", dns.TypeA)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("external name: %v %v", r, err)
		}
		return r.Answer[0].(*dns.A).A.String()
	}
	if got := external(); got != "192.0.2.1" {
		t.Fatalf("before the reload: %s, want upstream A's 192.0.2.1", got)
	}
	// The new upstream, and a TTL change (applied too).
	write(config(upB, 9))
	testkit.WaitEqual(t, 15*time.Second, "the external name after changing the config file", external, "192.0.2.2")
	r, err := testkit.Exchange("udp", addr, "web.prod.svc.cluster.local.", dns.TypeA)
	if err != nil || len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 9 {
		t.Fatalf("ttl: %v %v, want the reloaded 9", r, err)
	}
	// A broken file: the running config stays.
	write("apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\nforward:\n- zone: .\n  upstreams: [\"not an address\"]\n")
	metrics := metricsAddr(t)
	testkit.WaitFor(t, 15*time.Second, func() error {
		if m := scrape(t, metrics); m[`dnsconfigurer_serve_config_reloads_total{result="failed"}`] != 1 {
			return fmt.Errorf("the broken file was not counted as a failed reload: %v", m)
		}
		return nil
	})
	if got := external(); got != "192.0.2.2" {
		t.Fatalf("after a broken file: %s, want the running config's upstream", got)
	}
}

// lastServeMetrics is the --metrics-listen address the last startServe
// logged.
var lastServeMetrics string

func metricsAddr(t *testing.T) string {
	t.Helper()
	if lastServeMetrics == "" {
		t.Fatal("serve logged no metrics address")
	}
	return lastServeMetrics
}

// scrape reads the /metrics page at addr.
func scrape(t *testing.T, addr string) testkit.Metrics {
	t.Helper()
	m, err := testkit.Scrape(nil, "http://"+addr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestServeHosts: --hosts names are answered before forwarding, their
// reverse names too, and the zone keeps its names.
func TestServeHosts(t *testing.T) {
	up := stubUpstream(t, 300, "192.0.2.7")
	hostsFile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostsFile, []byte("192.168.49.1 host.minikube.internal\n# a comment\n10.0.0.9 web.prod.svc.cluster.local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := startServe(t, "--listen", "127.0.0.1:0", "--objects", "../../examples/objects", "--upstream", up.Addr, "--hosts", hostsFile)
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  string
	}{
		{"host.minikube.internal.", dns.TypeA, "192.168.49.1"},
		{"1.49.168.192.in-addr.arpa.", dns.TypePTR, "host.minikube.internal."},
		{"web.prod.svc.cluster.local.", dns.TypeA, ""}, // the zone's, not the file's 10.0.0.9
	} {
		r, err := testkit.Exchange("udp", addr, tc.name, tc.qtype)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			t.Fatalf("%s: %v %v", tc.name, r, err)
		}
		got := strings.Fields(r.Answer[0].String())
		if tc.want != "" && got[len(got)-1] != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, r.Answer[0], tc.want)
		}
		if tc.want == "" && got[len(got)-1] == "10.0.0.9" {
			t.Errorf("%s: the hosts file shadowed the zone: %v", tc.name, r.Answer[0])
		}
	}
	if n := up.ClientQueries(); n != 0 {
		t.Errorf("upstream asked %d times for names the hosts file and the zone answer", n)
	}
}

// TestServeStubDomains: per-zone forwarding over real sockets: names under
// a --config route go to its upstreams, an excepted name and every other
// name to the default route, and --forward on the command line adds a zone.
func TestServeStubDomains(t *testing.T) {
	def := stubUpstream(t, 300, "192.0.2.1").Addr
	corp := stubUpstream(t, 300, "192.0.2.2").Addr
	lab := stubUpstream(t, 300, "192.0.2.3").Addr
	path := filepath.Join(t.TempDir(), "server.yaml")
	body := exampleConfig(fmt.Sprintf("forward:\n- zone: .\n  upstreams: [%q]\n- zone: corp.example\n  except: [public.corp.example]\n  upstreams: [%q]\n  policy: sequential\n", def, corp))
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := startServe(t, "--listen", "127.0.0.1:0", "--config", path, "--forward", "lab.example="+lab)
	for _, tc := range []struct{ name, want string }{
		{"www.example.org.", "192.0.2.1"},
		{"db.corp.example.", "192.0.2.2"},
		{"www.public.corp.example.", "192.0.2.1"},
		{"x.lab.example.", "192.0.2.3"},
	} {
		for _, network := range []string{"udp", "tcp"} {
			r, err := testkit.Exchange(network, addr, tc.name, dns.TypeA)
			if err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != tc.want {
				t.Errorf("%s over %s: %v %v, want %s", tc.name, network, r, err, tc.want)
			}
		}
	}
}

// TestServeReusePort: with --reuse-port a second serve binds the address
// the first one serves (UDP and TCP) and answers there; without it, it
// cannot.
func TestServeReusePort(t *testing.T) {
	first := startServe(t, "--listen", "127.0.0.1:0", "--objects", "../../examples/objects", "--reuse-port")
	second := startServe(t, "--listen", first, "--objects", "../../examples/objects", "--reuse-port")
	if second != first {
		t.Fatalf("second instance on %s, want %s", second, first)
	}
	for _, network := range []string{"udp", "tcp"} {
		r, err := testkit.Exchange(network, first, "web.prod.svc.cluster.local.", dns.TypeA)
		if err != nil || len(r.Answer) != 1 {
			t.Fatalf("%s: %v %v", network, r, err)
		}
	}
	var stderr testkit.Buffer
	code := runServe(t.Context(), []string{"--lameduck=0s", "--listen", first, "--objects", "../../examples/objects"}, nil, io.Discard, &stderr)
	if code == exitOK || !strings.Contains(stderr.String(), "address already in use") {
		t.Fatalf("without --reuse-port: exit %d, %q; want a bind error", code, stderr.String())
	}
}
