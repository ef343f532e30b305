// Package shim_test runs the CRI shim against a real kube-apiserver and
// etcd (test/apiserver) in front of a fake container runtime on a unix
// socket: pods are written through the API, the tests call RunPodSandbox on
// the shim's socket as kubelet would, and check the request the runtime
// receives and the Events the shim posts. Most tests run the shim
// in-process (pkg/cri, wired as `dnsconfigurer shim` wires it);
// TestShimCommand runs the built command with a ServiceAccount bound to
// deploy/shim/rbac.yaml; TestNodeCredentials runs it, and the in-process
// shim, with a node's kubelet client certificate on a control plane of its
// own (deploy/components/node-credentials). They skip when the kube-apiserver and etcd binaries
// are absent (see test/testbin/build.sh). Run them with
//
//	export DNSCONFIGURER_TESTBIN="$(test/testbin/build.sh)"
//	go test -race ./test/integration/shim/
//
// Each test has a namespace of its own and checks that it leaves no
// goroutine behind; unix sockets live in a short temporary directory, the
// API server on 127.0.0.1.
package shim_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/cri"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

var controlPlane *apiserver.ControlPlane

func TestMain(m *testing.M) {
	code := apiserver.RunTests(m, &controlPlane)
	buildbin.Remove() // the shim command's
	os.Exit(code)
}

const (
	// node is the shim's node; otherNode has pods the shim must not see.
	node      = "node-a"
	otherNode = "node-b"
	// waitBound is how long anything the API server does may take to show:
	// a watch delivering a pod, an Event being posted. Generous for a
	// loaded two-core machine.
	waitBound = 20 * time.Second
	// callTimeout bounds one CRI call through the shim.
	callTimeout = 30 * time.Second
	// hostResolvConf is the node's resolver file the shim reads.
	hostResolvConf = "nameserver 192.0.2.53\nnameserver 192.0.2.54\nsearch corp.example\noptions timeout:2\n"
)

// testNode is the node's kubelet DNS settings, given to the shim and used
// to compute what kubelet would send.
var testNode = testkit.NodeWithNodeLocal()

// testHost is the engine's view of hostResolvConf.
var testHost = policy.Host{Nameservers: []string{"192.0.2.53", "192.0.2.54"}, Searches: []string{"corp.example"}, Options: []string{"timeout:2"}}

func newEngine(t *testing.T) *policy.Engine {
	t.Helper()
	eng, err := policy.New(testNode)
	if err != nil {
		t.Fatalf("policy engine: %v", err)
	}
	return eng
}

// socketDir returns a short temporary directory for unix sockets, removed
// when the test ends: t.TempDir's long paths can exceed the 108 bytes of a
// socket address.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "shim-it-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// checkGoroutines fails the test when goroutines started after this call
// are still running once the test's cleanups are done. Call it first, after
// cp.Namespace (whose shared admin connection outlives the test). The
// control plane's own process waiters are not the test's (a kube-apiserver
// started again).
func checkGoroutines(t *testing.T) {
	t.Helper()
	ignore := append([]goleak.Option{goleak.IgnoreCurrent()}, apiserver.IgnoreProcesses...)
	t.Cleanup(func() { goleak.VerifyNone(t, ignore...) })
}

// newClient is apiserver.NewClient: a clientset whose connections are all
// closed when the test ends.
func newClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	return apiserver.NewClient(t, cfg)
}

// fakeRuntime is the container runtime behind the shim: a CRI
// RuntimeService that records every RunPodSandboxRequest and answers
// Version. Embedding the Unimplemented server is fine for the runtime end.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer

	mu   sync.Mutex
	reqs []*runtimeapi.RunPodSandboxRequest
}

func (f *fakeRuntime) Version(_ context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: req.Version, RuntimeName: "fake", RuntimeVersion: "1.0", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeRuntime) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: fmt.Sprintf("sandbox-%d", len(f.reqs))}, nil
}

// sandbox returns the config of the last RunPodSandboxRequest for uid, or
// nil.
func (f *fakeRuntime) sandbox(uid string) *runtimeapi.PodSandboxConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.reqs) - 1; i >= 0; i-- {
		if f.reqs[i].GetConfig().GetMetadata().GetUid() == uid {
			return f.reqs[i].Config
		}
	}
	return nil
}

// startRuntime serves a fakeRuntime on a unix socket in dir until the test
// ends and returns it and the socket path.
func startRuntime(t *testing.T, dir string) (*fakeRuntime, string) {
	t.Helper()
	path := filepath.Join(dir, "runtime.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("runtime listen: %v", err)
	}
	rt := &fakeRuntime{}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, rt)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return rt, path
}

// dialShim returns a RuntimeService client on the shim's socket, as
// kubelet's, closed when the test ends.
func dialShim(t *testing.T, path string) runtimeapi.RuntimeServiceClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial shim: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn)
}

// shim is an in-process shim between a test and a fakeRuntime.
type shim struct {
	client   runtimeapi.RuntimeServiceClient // on the shim's socket
	runtime  *fakeRuntime
	informer *podfacts.PodInformer
	reg      *prometheus.Registry
	requests *apiserver.RequestLog // the API requests of the shim's client
}

// shimOptions change startShim's wiring.
type shimOptions struct {
	limits        cri.Limits
	lookupTimeout time.Duration
	// lookup wraps the pod informer, e.g. to see when a lookup starts.
	lookup func(podfacts.PodLookup) podfacts.PodLookup
	// node replaces testNode.
	node *policy.Node
}

// startShim runs the shim as `dnsconfigurer shim --kubeconfig ...
// --node-name node` wires it, with the API credentials of cfg, in front of
// a fresh fakeRuntime. It does not wait for the informer's first sync. The
// shim's log is printed when the test fails.
func startShim(t *testing.T, cfg *rest.Config, o shimOptions) *shim {
	t.Helper()
	if o.limits == "" {
		o.limits = cri.LimitsTrim
	}
	if o.lookupTimeout == 0 {
		o.lookupTimeout = waitBound
	}
	dir := socketDir(t)
	rt, rtPath := startRuntime(t, dir)
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte(hostResolvConf), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	requests := &apiserver.RequestLog{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("shim log:\n%s\nAPI requests:\n%s", logs.String(), strings.Join(requests.Summary(), "\n"))
		}
	})
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(requests.Wrap)
	client := newClient(t, cfg)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stopAll := func() { cancel(); wg.Wait() }
	watcher, err := hostresolv.Watch(ctx, resolv, hostresolv.WithLogger(log))
	if err != nil {
		cancel()
		t.Fatalf("watch resolv.conf: %v", err)
	}
	t.Cleanup(func() { <-watcher.Done() })
	informer, err := podfacts.NewPodInformer(client, node, log)
	if err != nil {
		cancel()
		t.Fatalf("pod informer: %v", err)
	}
	wg.Go(func() { informer.Run(ctx) })
	reg := prometheus.NewRegistry()
	rec, stopEvents, err := podfacts.NewAgentEvents(client, podfacts.ComponentShim, node, reg)
	if err != nil {
		stopAll()
		t.Fatalf("events: %v", err)
	}
	var lookup podfacts.PodLookup = informer
	if o.lookup != nil {
		lookup = o.lookup(informer)
	}
	eng := newEngine(t)
	if o.node != nil {
		if eng, err = policy.New(*o.node); err != nil {
			stopAll()
			stopEvents()
			t.Fatalf("policy engine: %v", err)
		}
	}
	srv, err := cri.New("unix://"+rtPath, eng, watcher,
		cri.WithPodLookup(lookup), cri.WithEvents(rec), cri.WithLimits(o.limits),
		cri.WithLookupTimeout(o.lookupTimeout), cri.WithLogger(log), cri.WithRegistry(reg))
	if err != nil {
		stopAll()
		stopEvents()
		t.Fatalf("shim: %v", err)
	}
	path := filepath.Join(dir, "shim.sock")
	l, err := cri.Listen(path)
	if err != nil {
		stopAll()
		stopEvents()
		t.Fatalf("shim listen: %v", err)
	}
	wg.Go(func() {
		if err := srv.Serve(ctx, l); err != nil {
			t.Errorf("shim serve: %v", err)
		}
	})
	// Cleanups run last-in first-out: the shim and informer stop, then the
	// recorder, then the client's connections close (registered above).
	t.Cleanup(func() {
		stopAll()
		stopEvents()
	})
	return &shim{client: dialShim(t, path), runtime: rt, informer: informer, reg: reg, requests: requests}
}

// startShimTest is the frame of most tests: a namespace, the goroutine
// check, an in-process shim with opts on the admin credentials, the
// engine and an admin client.
func startShimTest(t *testing.T, opts shimOptions) (*apiserver.ControlPlane, string, *shim, *policy.Engine, kubernetes.Interface) {
	t.Helper()
	cp := apiserver.Require(t, controlPlane)
	ns := cp.Namespace(t)
	checkGoroutines(t)
	s := startShim(t, cp.Config(), opts)
	return cp, ns, s, newEngine(t), newClient(t, cp.Config())
}

// waitSynced waits for the informer's first list.
func (s *shim) waitSynced(t *testing.T) {
	t.Helper()
	testkit.WaitEqual(t, waitBound, "pod informer synced", s.informer.HasSynced, true)
}

// counter returns the value of the series name with exactly labels, 0
// when there is none.
func (s *shim) counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	var pairs []string
	for k, v := range labels {
		pairs = append(pairs, k, v)
	}
	return testkit.Gather(t, s.reg)[testkit.Key(name, pairs...)]
}

// createPod creates pod in ns through the API and returns it as stored
// (with its UID and defaults).
func createPod(t *testing.T, client kubernetes.Interface, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	pod = pod.DeepCopy()
	pod.Namespace = ns
	if len(pod.Spec.Containers) == 0 {
		pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.example/app:1.0"}}
	}
	got, err := client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, pod.Name, err)
	}
	return got
}

// kubeletSandbox is the RunPodSandboxRequest kubelet sends for pod: the
// metadata, labels and annotations kubelet sets (the pod's annotations
// plus kubelet's config source "api"), the network namespace mode, and the
// DNS config and hostname kubelet computes for the node's settings. kubelet
// does not know the autopath annotation, so it computes plain ClusterFirst
// for such a pod.
func kubeletSandbox(t *testing.T, eng *policy.Engine, pod *corev1.Pod) *runtimeapi.RunPodSandboxRequest {
	t.Helper()
	in := podspec.Input(pod)
	in.PolicyAnnotation = ""
	res, err := eng.Compute(in, testHost)
	if err != nil {
		t.Fatalf("kubelet's DNS for %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	annotations := map[string]string{"kubernetes.io/config.source": "api", "kubernetes.io/config.seen": "2026-11-21T22:00:00Z"}
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	// kubelet labels a sandbox with the pod's labels and its own three.
	labels := map[string]string{"io.kubernetes.pod.name": pod.Name, "io.kubernetes.pod.namespace": pod.Namespace,
		"io.kubernetes.pod.uid": string(pod.UID)}
	for k, v := range pod.Labels {
		labels[k] = v
	}
	mode := runtimeapi.NamespaceMode_POD
	if pod.Spec.HostNetwork {
		mode = runtimeapi.NamespaceMode_NODE
	}
	return &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)},
		Hostname:     res.Hostname,
		LogDirectory: "/var/log/pods/" + pod.Namespace + "_" + pod.Name + "_" + string(pod.UID),
		DnsConfig:    &runtimeapi.DNSConfig{Servers: res.Nameservers, Searches: res.Searches, Options: res.Options},
		Labels:       labels,
		Annotations:  annotations,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: mode, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}}},
	}}
}

// runSandbox calls RunPodSandbox through the shim.
func runSandbox(client runtimeapi.RuntimeServiceClient, req *runtimeapi.RunPodSandboxRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, err := client.RunPodSandbox(ctx, req)
	return err
}

// podEvents lists the Events in ns about the pod with uid.
func podEvents(client kubernetes.Interface, ns string, uid string) ([]corev1.Event, error) {
	sel := fields.OneTermEqualSelector("involvedObject.uid", uid).String()
	list, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// waitEvents polls the Events about the pod with uid until done accepts
// them, and returns them; it fails the test after bound.
func waitEvents(t *testing.T, client kubernetes.Interface, ns, uid string, bound time.Duration, done func([]corev1.Event) bool) []corev1.Event {
	t.Helper()
	var evs []corev1.Event
	testkit.WaitFor(t, bound, func() error {
		var err error
		if evs, err = podEvents(client, ns, uid); err != nil || !done(evs) {
			return fmt.Errorf("events of pod %s (uid %s): %v (err %v)", ns, uid, summarize(evs), err)
		}
		return nil
	})
	return evs
}

// summarize renders Events as "type reason xcount: message" for messages.
func summarize(evs []corev1.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s %s x%d from %s/%s: %s", e.Type, e.Reason, e.Count, e.Source.Component, e.Source.Host, e.Message))
	}
	return out
}

// dnsOf renders a DNS config and hostname for comparisons and messages.
func dnsOf(dns *runtimeapi.DNSConfig, hostname string) string {
	return fmt.Sprintf("servers=%q searches=%q options=%q hostname=%q", dns.GetServers(), dns.GetSearches(), dns.GetOptions(), hostname)
}

// resultOf renders an engine result as dnsOf does.
func resultOf(res policy.Result) string {
	return dnsOf(&runtimeapi.DNSConfig{Servers: res.Nameservers, Searches: res.Searches, Options: res.Options}, res.Hostname)
}
