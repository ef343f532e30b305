// Package nodelocalroute runs the cluster DNS (`dnsconfigurer serve
// --config`, on the example objects) behind node-local (`serve --mode
// node-local --cluster-config` of the same file), both the binary built by
// test/buildbin, on loopback addresses, with fake upstreams: the cluster
// DNS's default route, a stub domain's servers and the node's nameserver
// (issue 30). The cluster DNS's stub domain, hosts file, override and
// rewrites (exact and suffix) get its answers through node-local in both
// nodeLocal.external modes; other
// names reach the node's nameserver directly with "direct" and go through
// the cluster DNS with "cluster"; a stub domain added to the file is in
// service in node-local without a restart and without a failed query.
//
//	go test -count=1 -v ./test/integration/nodelocalroute/
package nodelocalroute

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// Which server made an answer: each fake upstream answers every A
// question with its own address (TTL 1, so node-local's cache follows a
// change within a second).
const (
	viaClusterDefault = "10.8.8.8" // the cluster DNS's "." route
	viaStub           = "10.1.1.1" // the stub domains' servers
	viaNode           = "10.9.9.9" // the node's nameserver
	viaHosts          = "10.2.2.2" // the cluster DNS's hosts file
	viaOverride       = "10.3.3.3" // the cluster DNS's override
)

// fake runs an upstream on addr answering every A question with ip.
func fake(t *testing.T, addr, ip string) string {
	t.Helper()
	return testkit.NewUpstream(t, testkit.Reply(func(q dns.Question, r *dns.Msg) {
		if q.Qtype == dns.TypeA {
			r.Answer = append(r.Answer, testkit.A(q.Name, 1, ip))
		}
	}), testkit.At(addr)).Addr
}

// env is the chain of one test: the fakes, the cluster DNS's file and
// the cluster DNS.
type env struct {
	dir, config, resolv string
	stub, def           string
	cluster             *buildbin.Serve
}

func (e *env) writeConfig(t *testing.T, stubZones ...string) {
	t.Helper()
	body := fmt.Sprintf("apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\n"+
		"hosts: {file: %s}\noverrides:\n- {name: db.override.example, addresses: [%s]}\n"+
		"rewrites:\n- {match: exact, from: old.rewrite.example, to: a.stub.example}\n- {match: suffix, from: .legacy.example, to: .stub.example}\n"+
		"forward:\n- zone: .\n  upstreams: [%q]\n", filepath.Join(e.dir, "hosts"), viaOverride, e.def)
	for _, z := range stubZones {
		body += fmt.Sprintf("- zone: %s\n  upstreams: [%q]\n", z, e.stub)
	}
	testkit.WriteAtomic(t, e.config, body)
}

// newEnv starts the fakes and the cluster DNS; base is the test's own
// 127.0.0.0/8 prefix ("127.0.0.7"): base+"1".."4".
func newEnv(t *testing.T, base string) *env {
	t.Helper()
	node := base + "1"
	pc, err := net.ListenPacket("udp", node+":53")
	if err != nil {
		t.Skipf("the node's nameserver needs port 53 of %s (root): %v", node, err)
	}
	pc.Close() // the fake binds it below
	e := &env{dir: t.TempDir()}
	fake(t, node+":53", viaNode)
	e.stub = fake(t, base+"2:0", viaStub)
	e.def = fake(t, base+"3:0", viaClusterDefault)
	e.config = filepath.Join(e.dir, "config.yaml")
	e.resolv = filepath.Join(e.dir, "resolv.conf")
	if err := os.WriteFile(filepath.Join(e.dir, "hosts"), []byte(viaHosts+" nas.home\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.resolv, []byte("nameserver "+node+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.writeConfig(t, "stub.example")
	e.cluster = buildbin.StartServeArgs(t, base+"4:0", "--config", e.config, "--objects", "../../../examples/objects")
	return e
}

// ask returns the first A record's address of name at server ("" for
// none), failing on an error or an rcode other than NOERROR.
func ask(server, name string) (string, error) {
	r, err := testkit.Exchange("udp", server, name, dns.TypeA)
	switch {
	case err != nil:
		return "", err
	case r.Rcode != dns.RcodeSuccess:
		return "", fmt.Errorf("%s: %s", name, dns.RcodeToString[r.Rcode])
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			return a.A.String(), nil
		}
	}
	return "", nil
}

// TestClusterAnswersThroughNodeLocal: the names the cluster DNS treats
// specially get its answer through node-local in both external modes;
// other names go where the mode says.
func TestClusterAnswersThroughNodeLocal(t *testing.T) {
	e := newEnv(t, "127.0.0.7")
	for i, tt := range []struct {
		external, plain string // the mode, and where a plain external name is answered
	}{
		{"direct", viaNode},
		{"cluster", viaClusterDefault},
	} {
		t.Run(tt.external, func(t *testing.T) {
			nl := buildbin.StartServeArgs(t, fmt.Sprintf("127.0.0.7%d:0", 5+i), "--mode", "node-local", "--cluster-upstream", e.cluster.DNS,
				"--resolv-conf", e.resolv, "--cluster-config", e.config, "--external", tt.external)
			for _, c := range []struct{ name, want string }{
				{"a.stub.example.", viaStub},
				{"nas.home.", viaHosts},
				{"db.override.example.", viaOverride},
				{"old.rewrite.example.", viaStub},   // rewritten to a.stub.example
				{"web.legacy.example.", viaStub},    // rewritten to web.stub.example
				{"web.prod.svc.cluster.local.", ""}, // the cluster DNS's records: compared below
				{"www.example.com.", tt.plain},
			} {
				got, err := ask(nl.DNS, c.name)
				if err != nil {
					t.Fatalf("%s via node-local: %v", c.name, err)
				}
				direct, err := ask(e.cluster.DNS, c.name)
				if err != nil {
					t.Fatalf("%s at the cluster DNS: %v", c.name, err)
				}
				want := c.want
				if want == "" {
					want = direct
				}
				if got != want {
					t.Errorf("%s via node-local: %q, want %q (the cluster DNS answers %q)", c.name, got, want, direct)
				}
				if c.name != "www.example.com." && got != direct {
					t.Errorf("%s: node-local %q, the cluster DNS %q", c.name, got, direct)
				}
			}
		})
	}
}

// TestStubZoneAddedLive: a stub domain added to the file reaches node-local
// (and the cluster DNS) without a restart, while a client asks
// continuously: no query fails during the change.
func TestStubZoneAddedLive(t *testing.T) {
	e := newEnv(t, "127.0.0.8")
	nl := buildbin.StartServeArgs(t, "127.0.0.85:0", "--mode", "node-local", "--cluster-upstream", e.cluster.DNS,
		"--resolv-conf", e.resolv, "--cluster-config", e.config, "--external", "direct")
	if got, err := ask(nl.DNS, "x.new.example."); err != nil || got != viaNode {
		t.Fatalf("before the change: %q %v, want %s from the node's nameserver", got, err, viaNode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var asked, failed atomic.Int64
	var lastErr atomic.Value
	for _, name := range []string{"x.new.example.", "a.stub.example.", "web.prod.svc.cluster.local."} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				asked.Add(1)
				if _, err := ask(nl.DNS, name); err != nil {
					failed.Add(1)
					lastErr.Store(err.Error())
				}
			}
		}()
	}
	e.writeConfig(t, "stub.example", "new.example")
	start := time.Now()
	testkit.WaitFor(t, 20*time.Second, func() error {
		if got, err := ask(nl.DNS, "x.new.example."); err != nil || got != viaStub {
			return fmt.Errorf("x.new.example. via node-local: %q %v, want %s from the stub domain's servers", got, err, viaStub)
		}
		return nil
	})
	took := time.Since(start)
	// And a while after the change, still asking.
	testkit.Holds(t, 500*time.Millisecond, func() error {
		if n := failed.Load(); n > 0 {
			return fmt.Errorf("%d failed", n)
		}
		return nil
	})
	cancel()
	wg.Wait()
	t.Logf("new stub zone in service after %v; %d queries asked, %d failed", took.Round(time.Millisecond), asked.Load(), failed.Load())
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d queries failed during the change (last: %v)", n, asked.Load(), lastErr.Load())
	}
	if got := nl.Metric(t, "dnsconfigurer_nodelocal_cluster_config_errors_total"); got != 0 {
		t.Errorf("cluster_config_errors_total = %v, want 0", got)
	}
}
