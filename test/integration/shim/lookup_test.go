package shim_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/cri"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// fromAPI is what the shim sends the runtime for pod when the lookup finds
// it: the engine's result for the API pod, its hostname unless the sandbox
// is on the host network (kubelet's, empty, then).
func fromAPI(t *testing.T, eng *policy.Engine, pod *corev1.Pod, req *runtimeapi.RunPodSandboxRequest) string {
	t.Helper()
	res, err := eng.Compute(podspec.Input(pod), testHost)
	if err != nil {
		t.Fatalf("engine, API pod: %v", err)
	}
	if pod.Spec.HostNetwork || res.Hostname == "" {
		res.Hostname = req.Config.Hostname
	}
	return resultOf(res)
}

// fromSandbox is what the shim sends when the lookup does not find the pod:
// the engine's result for what podfacts.FromSandbox recovers from the sandbox
// config, with kubelet's hostname.
func fromSandbox(t *testing.T, eng *policy.Engine, req *runtimeapi.RunPodSandboxRequest) string {
	t.Helper()
	in, err := podfacts.FromSandbox(cri.SandboxOf(req.Config), eng, testHost)
	if err != nil {
		t.Fatalf("FromSandbox: %v", err)
	}
	res, err := eng.Compute(in, testHost)
	if err != nil {
		t.Fatalf("engine, sandbox config: %v", err)
	}
	res.Hostname = req.Config.Hostname
	return resultOf(res)
}

// apiAndSandbox are what the shim sends for pod when its lookup finds the
// API pod and when it does not. A case whose two are the same tells
// nothing and fails t.
func apiAndSandbox(t *testing.T, eng *policy.Engine, pod *corev1.Pod, req *runtimeapi.RunPodSandboxRequest) (api, sandbox string) {
	t.Helper()
	api, sandbox = fromAPI(t, eng, pod, req), fromSandbox(t, eng, req)
	if api == sandbox {
		t.Fatalf("bad case: the API pod and the sandbox config give the same %s", api)
	}
	return api, sandbox
}

// sandboxGot runs req through the shim on client and returns what the
// runtime rt then got; what names the call in a failure.
func sandboxGot(t *testing.T, client runtimeapi.RuntimeServiceClient, rt *fakeRuntime, req *runtimeapi.RunPodSandboxRequest, what string) string {
	t.Helper()
	if err := runSandbox(client, req); err != nil {
		t.Fatalf("RunPodSandbox, %s: %v", what, err)
	}
	return gotSandbox(t, rt, req.Config.Metadata.Uid)
}

// gotSandbox is what the runtime received for uid.
func gotSandbox(t *testing.T, rt *fakeRuntime, uid string) string {
	t.Helper()
	cfg := rt.sandbox(uid)
	if cfg == nil {
		t.Fatalf("the runtime got no sandbox for uid %s", uid)
	}
	return dnsOf(cfg.DnsConfig, cfg.Hostname)
}

// apiPods are pods whose DNS the sandbox config alone cannot give: kubelet's
// request for them leads the shim, without the API server, to another
// result. Each case checks that.
func apiPods(ns string) []struct {
	name  string
	pod   *corev1.Pod
	stale func(*runtimeapi.PodSandboxConfig) // changes kubelet's request, if set
} {
	fqdn := true
	return []struct {
		name  string
		pod   *corev1.Pod
		stale func(*runtimeapi.PodSandboxConfig)
	}{
		{
			// The pod's own search equal to the node's is deduplicated away
			// by kubelet; only the API pod keeps it for autopath.
			name: "autopath with the host search",
			pod: &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "autopath", Annotations: map[string]string{policy.AnnotationDNSPolicy: string(policy.ClusterFirstWithAutopath)}},
				Spec: corev1.PodSpec{NodeName: node, DNSPolicy: corev1.DNSClusterFirst, DNSConfig: &corev1.PodDNSConfig{
					Searches: []string{"corp.example", "app.example"},
					Options:  []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("3")}},
				}},
			},
		},
		{
			// A None pod whose config is ClusterFirst's, down to the node's
			// search, reads as ClusterFirst from the sandbox config; with
			// the autopath annotation (which a None pod ignores) it turns
			// into autopath there. The API pod keeps its own config.
			name: "none with ClusterFirst's config and the autopath annotation",
			pod: &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "none", Annotations: map[string]string{policy.AnnotationDNSPolicy: string(policy.ClusterFirstWithAutopath)}},
				Spec: corev1.PodSpec{NodeName: node, DNSPolicy: corev1.DNSNone, DNSConfig: &corev1.PodDNSConfig{
					Nameservers: []string{"10.96.0.10"},
					Searches:    []string{ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"},
					Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("5")}},
				}},
			},
		},
		{
			// kubelet's request carries a hostname that is not the pod's
			// (as from a kubelet that computed it differently): only the
			// API pod gives the FQDN of setHostnameAsFQDN.
			name: "cluster first, FQDN hostname",
			pod: &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "db-0"},
				Spec: corev1.PodSpec{NodeName: node, DNSPolicy: corev1.DNSClusterFirst, Hostname: "db-0", Subdomain: "db", SetHostnameAsFQDN: &fqdn,
					DNSConfig: &corev1.PodDNSConfig{Searches: []string{"a.example"}}},
			},
			stale: func(c *runtimeapi.PodSandboxConfig) { c.Hostname = "db-0" },
		},
		{
			// Host network: the autopath blind spot again, and no hostname
			// although the pod has one.
			name: "host network autopath",
			pod: &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "agent", Annotations: map[string]string{policy.AnnotationDNSPolicy: string(policy.ClusterFirstWithAutopath)}},
				Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, DNSPolicy: corev1.DNSClusterFirstWithHostNet, Hostname: "agent",
					DNSConfig: &corev1.PodDNSConfig{Searches: []string{"corp.example"}}},
			},
		},
	}
}

// TestPodFromAPIServer creates pods through the API and runs their sandboxes
// through the shim: the runtime gets the DNS config and hostname computed
// from the API pod, which differ from what the sandbox config alone gives.
func TestPodFromAPIServer(t *testing.T) {
	_, ns, s, eng, admin := startShimTest(t, shimOptions{})
	hits := 0
	for _, tc := range apiPods(ns) {
		t.Run(tc.name, func(t *testing.T) {
			pod := createPod(t, admin, ns, tc.pod)
			req := kubeletSandbox(t, eng, pod)
			if tc.stale != nil {
				tc.stale(req.Config)
			}
			want, other := apiAndSandbox(t, eng, pod, req)
			got := sandboxGot(t, s.client, s.runtime, req, pod.Name)
			hits++
			if got != want {
				t.Errorf("runtime got %s\nwant (API pod) %s\nsandbox config alone gives %s", got, want, other)
			}
			if pod.Spec.HostNetwork && s.runtime.sandbox(string(pod.UID)).Hostname != "" {
				t.Errorf("host-network sandbox got a hostname")
			}
			if n := s.counter(t, "dnsconfigurer_cri_pod_lookups_total", map[string]string{"result": "hit"}); n != float64(hits) {
				t.Errorf("pod_lookups_total{hit} = %v, want %d", n, hits)
			}
		})
	}
	// The None pod's config is kubelet's already: unchanged, not rewritten.
	rewritten := s.counter(t, "dnsconfigurer_cri_sandboxes_total", map[string]string{"source": "apiserver", "outcome": "rewritten"})
	unchanged := s.counter(t, "dnsconfigurer_cri_sandboxes_total", map[string]string{"source": "apiserver", "outcome": "unchanged"})
	if rewritten+unchanged != float64(hits) || unchanged != 1 {
		t.Errorf("sandboxes_total{apiserver}: %v rewritten, %v unchanged; want %d in all, 1 unchanged", rewritten, unchanged, hits)
	}
}

// TestPodOnAnotherNode: the informer holds the pods of the shim's node
// only, so a pod bound to another node is not found and its sandbox gets
// what the sandbox config gives, after the lookup timeout.
func TestPodOnAnotherNode(t *testing.T) {
	const timeout = 500 * time.Millisecond
	_, ns, s, eng, admin := startShimTest(t, shimOptions{lookupTimeout: timeout})
	s.waitSynced(t)

	base := apiPods(ns)[0].pod
	mine := createPod(t, admin, ns, base)
	other := base.DeepCopy()
	other.Name, other.Spec.NodeName = "elsewhere", otherNode
	other = createPod(t, admin, ns, other)

	// The pod of this node first: once it is found, the informer has had
	// time to see the other too, had the selector let it through.
	req := kubeletSandbox(t, eng, mine)
	if got, want := sandboxGot(t, s.client, s.runtime, req, "this node's pod"), fromAPI(t, eng, mine, req); got != want {
		t.Fatalf("this node's pod: runtime got %s, want %s", got, want)
	}

	req = kubeletSandbox(t, eng, other)
	fromPod, want := apiAndSandbox(t, eng, other, req)
	start := time.Now()
	if err := runSandbox(s.client, req); err != nil {
		t.Fatalf("RunPodSandbox, other node's pod: %v", err)
	}
	took := time.Since(start)
	if got := gotSandbox(t, s.runtime, string(other.UID)); got != want {
		t.Errorf("other node's pod: runtime got %s\nwant (sandbox config) %s\nthe API pod would give %s", got, want, fromPod)
	}
	if took < timeout {
		t.Errorf("other node's pod answered after %v, before the lookup timeout %v", took, timeout)
	}
	if n := s.counter(t, "dnsconfigurer_cri_pod_lookups_total", map[string]string{"result": "miss"}); n != 1 {
		t.Errorf("pod_lookups_total{miss} = %v, want 1", n)
	}
	if n := s.counter(t, "dnsconfigurer_cri_sandboxes_total", map[string]string{"source": "sandbox", "outcome": "rewritten"}); n != 1 {
		t.Errorf("sandboxes_total{sandbox,rewritten} = %v, want 1", n)
	}
}

// waitingLookup is a PodLookup that reports each lookup that missed the
// pod and waits for it.
type waitingLookup struct {
	podfacts.PodLookup
	waiting chan string // the uid, when a lookup waits
}

func (l waitingLookup) Pod(ctx context.Context, uid string) (policy.Input, bool) {
	return l.PodLookup.Pod(&waitCtx{Context: ctx, wait: func() {
		select {
		case l.waiting <- uid:
		default:
		}
	}}, uid)
}

// waitCtx calls wait the first time Done is asked for: the informer's
// lookup asks only to wait, once it has missed the pod.
type waitCtx struct {
	context.Context
	once sync.Once
	wait func()
}

func (c *waitCtx) Done() <-chan struct{} {
	c.once.Do(c.wait)
	return c.Context.Done()
}

// TestPodBoundAfterSandboxCall: a sandbox whose pod the informer has not
// seen yet waits for it. The pod is created unscheduled (so its UID is
// known but the node's informer cannot have it), the sandbox call starts,
// and only then is the pod bound to the node through pods/binding, as the
// scheduler does; the call then completes with the API pod's config, well
// before the lookup timeout.
func TestPodBoundAfterSandboxCall(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ns := cp.Namespace(t)
	checkGoroutines(t)
	waiting := make(chan string, 1)
	const timeout = 20 * time.Second
	s := startShim(t, cp.Config(), shimOptions{lookupTimeout: timeout, lookup: func(p podfacts.PodLookup) podfacts.PodLookup {
		return waitingLookup{PodLookup: p, waiting: waiting}
	}})
	eng := newEngine(t)
	admin := newClient(t, cp.Config())
	s.waitSynced(t)

	unbound := apiPods(ns)[0].pod.DeepCopy()
	unbound.Spec.NodeName = ""
	pod := createPod(t, admin, ns, unbound)
	pod.Spec.NodeName = node // as it will be once bound, for kubelet's request
	req := kubeletSandbox(t, eng, pod)
	want, other := apiAndSandbox(t, eng, pod, req)

	var wg sync.WaitGroup
	var callErr error
	var took time.Duration
	wg.Go(func() {
		start := time.Now()
		callErr = runSandbox(s.client, req)
		took = time.Since(start)
	})
	select {
	case uid := <-waiting:
		if uid != string(pod.UID) {
			t.Errorf("lookup waiting for uid %s, want %s", uid, pod.UID)
		}
	case <-time.After(waitBound):
		t.Fatal("the shim's lookup did not miss the pod and wait")
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	bound := time.Now()
	if err := admin.CoreV1().Pods(ns).Bind(context.Background(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind pod: %v", err)
	}
	wg.Wait()
	if callErr != nil {
		t.Fatalf("RunPodSandbox: %v", callErr)
	}
	if got := gotSandbox(t, s.runtime, string(pod.UID)); got != want {
		t.Errorf("runtime got %s\nwant (API pod) %s\nsandbox config alone gives %s", got, want, other)
	}
	if took >= timeout {
		t.Errorf("the call took %v, the whole lookup timeout", took)
	}
	t.Logf("sandbox call took %v, %v after the binding", took, time.Since(bound))
	if n := s.counter(t, "dnsconfigurer_cri_pod_lookups_total", map[string]string{"result": "hit"}); n != 1 {
		t.Errorf("pod_lookups_total{hit} = %v, want 1", n)
	}
}

// TestStaticPod: a static pod's sandbox carries its config hash as UID and
// a config source other than "api". The shim finds its mirror pod (UID of
// its own, the hash in kubernetes.io/config.mirror) and does not wait for
// a mirror pod that does not exist.
func TestStaticPod(t *testing.T) {
	const timeout = 20 * time.Second
	_, ns, s, eng, admin := startShimTest(t, shimOptions{lookupTimeout: timeout})
	s.waitSynced(t)

	static := func(name, hash string) *runtimeapi.RunPodSandboxRequest {
		pod := apiPods(ns)[0].pod.DeepCopy()
		pod.Name, pod.Namespace, pod.UID = name, ns, types.UID(hash)
		req := kubeletSandbox(t, eng, pod)
		req.Config.Annotations["kubernetes.io/config.source"] = "file"
		req.Config.Annotations["kubernetes.io/config.hash"] = hash
		return req
	}

	t.Run("mirror pod", func(t *testing.T) {
		hash := configHash(t)
		mirror := apiPods(ns)[0].pod.DeepCopy()
		mirror.Name = "static-" + node
		mirror.Annotations["kubernetes.io/config.mirror"] = hash
		mirror.Annotations["kubernetes.io/config.source"] = "file"
		mirror = createPod(t, admin, ns, mirror)
		// Wait for the informer, as the static pod's sandbox does not.
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		_, ok := s.informer.Pod(ctx, hash)
		cancel()
		if !ok {
			t.Fatalf("the informer has no pod for config hash %s after %v", hash, waitBound)
		}
		req := static(mirror.Name, hash)
		mirror.UID = types.UID(hash) // the engine's input carries the static pod's UID
		want, other := apiAndSandbox(t, eng, mirror, req)
		if got := sandboxGot(t, s.client, s.runtime, req, "mirror pod"); got != want {
			t.Errorf("runtime got %s\nwant (mirror pod) %s\nsandbox config alone gives %s", got, want, other)
		}
	})

	t.Run("no mirror pod", func(t *testing.T) {
		hash := configHash(t)
		req := static("static-gone-"+node, hash)
		want := fromSandbox(t, eng, req)
		start := time.Now()
		if err := runSandbox(s.client, req); err != nil {
			t.Fatalf("RunPodSandbox: %v", err)
		}
		if took := time.Since(start); took > timeout/2 {
			t.Errorf("a static pod without a mirror pod waited %v (lookup timeout %v)", took, timeout)
		}
		if got := gotSandbox(t, s.runtime, hash); got != want {
			t.Errorf("runtime got %s\nwant (sandbox config) %s", got, want)
		}
	})
}

// configHash returns a random config hash, as kubelet gives a static pod.
// Mirror pods are indexed across namespaces, so each run needs its own.
func configHash(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func ptr[T any](v T) *T { return &v }
