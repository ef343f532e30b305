// Package dnsserver_test runs the cluster DNS server against a real
// kube-apiserver and etcd (test/apiserver): Services, EndpointSlices and Pods
// are written through the API and the tests ask the server real DNS
// questions over UDP and TCP on 127.0.0.1 until the answers follow. Most
// tests run the server in-process (pkg/clusterdns, store and feed, wired as
// `dnsconfigurer serve` wires them); TestServeCommand runs the built command.
// They skip when the kube-apiserver and etcd binaries are absent (see
// test/testbin/build.sh):
//
//	DNSCONFIGURER_TESTBIN=$(test/testbin/build.sh) go test -race -v ./test/integration/dnsserver/
//
// -v prints the programming latency (TestProgrammingLatency) and the
// catch-up times after a kube-apiserver outage.
package dnsserver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

var controlPlane *apiserver.ControlPlane

func TestMain(m *testing.M) {
	// client-go's reflectors log every refused or failed list and watch,
	// which these tests cause on purpose; failures report the requests
	// themselves (apiserver.RequestLog).
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	code := apiserver.RunTests(m, &controlPlane)
	buildbin.Remove() // TestServeCommand's
	os.Exit(code)
}

const (
	zone = "cluster.local"
	// followBound is how long an answer may take to follow a write. The
	// feed publishes 100ms after a change; the rest is the API server, the
	// watch and a loaded two-core machine.
	followBound = 10 * time.Second
	// pollEvery paces the DNS questions while waiting for an answer.
	pollEvery = 2 * time.Millisecond
)

// server is an in-process DNS server fed by informers from the API server.
type server struct {
	addr     string // UDP and TCP
	handler  *clusterdns.Handler
	http     http.Handler // /metrics, /healthz, /readyz
	reg      *prometheus.Registry
	requests *apiserver.RequestLog
}

// newClient is apiserver.NewClient: a clientset whose connections are all
// closed when the test ends.
func newClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	return apiserver.NewClient(t, cfg)
}

// checkGoroutines fails the test when goroutines started after this call
// are still running once the test's cleanups are done. Call it first, after
// cp.Namespace (whose shared admin connection outlives the test).
func checkGoroutines(t *testing.T) {
	t.Helper()
	ignore := append([]goleak.Option{goleak.IgnoreCurrent()}, apiserver.IgnoreProcesses...)
	t.Cleanup(func() { goleak.VerifyNone(t, ignore...) })
}

// startServer runs the DNS server as `dnsconfigurer serve --kubeconfig
// --pods verified` does, with the API credentials of cfg, on 127.0.0.1:0:
// the objects it skips are counted on its registry and get their Events
// through the same client. Every API request it makes is recorded. opts
// change the feed, e.g. its Resync. It does not wait for the first sync.
func startServer(t *testing.T, cfg *rest.Config, opts ...func(*kubefeed.Cluster)) *server {
	t.Helper()
	log := &apiserver.RequestLog{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(log.Wrap)
	client := newClient(t, cfg)
	st, err := store.New(store.Options{Zone: zone, TTL: 5, Pods: store.PodsVerified})
	if err != nil {
		t.Fatalf("store: %v", err)
	}
	reg := prometheus.NewRegistry()
	if err := clusterdns.RegisterRecordMetrics(reg, st); err != nil {
		t.Fatalf("metrics: %v", err)
	}
	events, stopEvents := kubefeed.NewEventRecorder(client)
	skips, err := kubefeed.NewSkips(reg, testkit.Logger(t), events)
	if err != nil {
		stopEvents()
		t.Fatalf("skips: %v", err)
	}
	h := clusterdns.NewHandler(zone, st)
	srv := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: h, Zones: []string{zone}}
	reg.MustRegister(srv)
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Start(ctx); err != nil {
		cancel()
		stopEvents()
		t.Fatalf("start dns server: %v", err)
	}
	c := &kubefeed.Cluster{Client: client, Store: st, Pods: true, Skips: skips}
	for _, o := range opts {
		o(c)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("feed: %v", err)
		}
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("dns shutdown: %v", err)
		}
		stopEvents()
	})
	return &server{addr: srv.Addrs()[0], handler: h, http: health.Handler(reg, health.Condition(h.Synced, "not synced")), reg: reg, requests: log}
}

// syncedServer is the frame of most tests: a namespace, the goroutine
// check, an admin client and a synced server with the admin credentials.
func syncedServer(t *testing.T, cp *apiserver.ControlPlane, opts ...func(*kubefeed.Cluster)) (ns string, client kubernetes.Interface, srv *server) {
	t.Helper()
	ns = cp.Namespace(t)
	checkGoroutines(t)
	client = newClient(t, cp.Config())
	srv = startServer(t, cp.Config(), opts...)
	srv.waitSynced(t)
	return ns, client, srv
}

// readyz returns the status code of the server's /readyz.
func (s *server) readyz() int {
	rec := httptest.NewRecorder()
	s.http.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code
}

// waitSynced waits for the first full sync.
func (s *server) waitSynced(t *testing.T) {
	t.Helper()
	testkit.WaitFor(t, followBound, func() error {
		if !s.handler.Synced() {
			return fmt.Errorf("not synced; API requests: %v", s.requests.Summary())
		}
		return nil
	})
}

// waitRequests waits until at least n recorded requests match.
func waitRequests(t *testing.T, l *apiserver.RequestLog, n int, what string, match func(apiserver.Request) bool) {
	t.Helper()
	testkit.WaitFor(t, followBound, func() error {
		if l.Count(match) < n {
			return fmt.Errorf("no %d requests %s; requests: %v", n, what, l.Summary())
		}
		return nil
	})
}

// ask sends one question to addr over UDP (or TCP) and returns the rcode
// and the answer section, one "TYPE rdata" per record, sorted:
// "NOERROR A 10.96.0.10", "NXDOMAIN", "NOERROR CNAME web.ns.svc.cluster.local. A 10.96.0.10".
func ask(addr, name string, qtype uint16, tcp bool) (string, error) {
	network := "udp"
	if tcp {
		network = "tcp"
	}
	r, err := testkit.Exchange(network, addr, dns.Fqdn(name), qtype)
	if err != nil {
		return "", err
	}
	if r.Truncated {
		return "", fmt.Errorf("%s %s: truncated", name, dns.TypeToString[qtype])
	}
	rrs := make([]string, 0, len(r.Answer))
	for _, rr := range r.Answer {
		data := strings.TrimPrefix(rr.String(), rr.Header().String())
		rrs = append(rrs, dns.TypeToString[rr.Header().Rrtype]+" "+data)
	}
	slices.Sort(rrs)
	return strings.Join(append([]string{dns.RcodeToString[r.Rcode]}, rrs...), " "), nil
}

// waitAnswer asks until the answer is want, over UDP and then TCP, and
// returns how long the UDP answer took to appear. It fails the test after
// followBound.
func waitAnswer(t *testing.T, addr, name string, qtype uint16, want string) time.Duration {
	t.Helper()
	return waitAnswerWithin(t, followBound, addr, name, qtype, want)
}

// waitAnswerWithin is waitAnswer with another bound.
func waitAnswerWithin(t *testing.T, bound time.Duration, addr, name string, qtype uint16, want string) time.Duration {
	t.Helper()
	start := time.Now()
	testkit.WaitEvery(t, bound, pollEvery, func() error {
		if got, err := ask(addr, name, qtype, false); err != nil || got != want {
			return fmt.Errorf("%s %s: got %q (err %v), want %q", name, dns.TypeToString[qtype], got, err, want)
		}
		return nil
	})
	took := time.Since(start)
	if got, err := ask(addr, name, qtype, true); err != nil || got != want {
		t.Fatalf("%s %s over TCP: got %q (err %v), want %q", name, dns.TypeToString[qtype], got, err, want)
	}
	return took
}

// mustAnswer asks once, over UDP and TCP, and fails unless the answer is want.
func mustAnswer(t *testing.T, addr, name string, qtype uint16, want string) {
	t.Helper()
	for _, tcp := range []bool{false, true} {
		if got, err := ask(addr, name, qtype, tcp); err != nil || got != want {
			t.Fatalf("%s %s (tcp %v): got %q (err %v), want %q", name, dns.TypeToString[qtype], tcp, got, err, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
