package shim_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/cri"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// overLimitPod is a valid pod whose merged DNS config exceeds kubelet's
// limits: the cluster DNS plus its 3 nameservers make 4; the 3 cluster
// searches, the node's and its 32 make 36.
func overLimitPod(name string) *corev1.Pod {
	cfg := &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}}
	for i := range 32 {
		cfg.Searches = append(cfg.Searches, fmt.Sprintf("s%02d.example", i))
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: node, DNSPolicy: corev1.DNSClusterFirst, DNSConfig: cfg},
	}
}

// The messages of the two DNSConfigForming Events, up to the applied line.
const (
	nameserverEvent = "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 10.96.0.10 10.0.0.1 10.0.0.2"
	searchEvent     = "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: "
)

// checkTrimEvents waits up to bound until the pod has the two Warning
// Events of a trimmed config, each counted count times, and checks what
// they say.
func checkTrimEvents(t *testing.T, client kubernetes.Interface, pod *corev1.Pod, count int32, bound time.Duration) {
	t.Helper()
	evs := waitEvents(t, client, pod.Namespace, string(pod.UID), bound, func(evs []corev1.Event) bool {
		if len(evs) != 2 {
			return false
		}
		for _, e := range evs {
			if e.Count != count {
				return false
			}
		}
		return true
	})
	var sawNameservers, sawSearches bool
	for _, e := range evs {
		o := e.InvolvedObject
		if e.Type != corev1.EventTypeWarning || e.Reason != policy.ReasonDNSConfigForming ||
			o.Kind != "Pod" || o.APIVersion != "v1" || o.Namespace != pod.Namespace || o.Name != pod.Name || o.UID != pod.UID ||
			e.Source.Component != "dnsconfigurer-shim" || e.Source.Host != node {
			t.Errorf("event %+v", e)
		}
		switch {
		case e.Message == nameserverEvent:
			sawNameservers = true
		case strings.HasPrefix(e.Message, searchEvent):
			sawSearches = true
			if n := len(strings.Fields(strings.TrimPrefix(e.Message, searchEvent))); n != policy.MaxSearchPaths {
				t.Errorf("search event names %d searches, want %d: %q", n, policy.MaxSearchPaths, e.Message)
			}
		default:
			t.Errorf("unexpected event message %q", e.Message)
		}
	}
	if !sawNameservers || !sawSearches {
		t.Errorf("events %q: want one about nameservers and one about searches", summarize(evs))
	}
}

// TestTrimEvents: with limits trim the runtime gets the trimmed config and
// the pod gets a Warning Event DNSConfigForming per limit, visible through
// the API; when kubelet retries the sandbox, the Events are counted again
// (client-go patches their count).
func TestTrimEvents(t *testing.T) {
	_, ns, s, eng, admin := startShimTest(t, shimOptions{limits: cri.LimitsTrim})
	pod := createPod(t, admin, ns, overLimitPod("big"))
	req := kubeletSandbox(t, eng, pod)
	for attempt := range 2 {
		req.Config.Metadata.Attempt = uint32(attempt)
		if err := runSandbox(s.client, req); err != nil {
			t.Fatalf("RunPodSandbox, attempt %d: %v", attempt, err)
		}
		checkTrimEvents(t, admin, pod, int32(attempt+1), waitBound)
	}
	got := s.runtime.sandbox(string(pod.UID)).DnsConfig
	if want := []string{"10.96.0.10", "10.0.0.1", "10.0.0.2"}; strings.Join(got.Servers, " ") != strings.Join(want, " ") {
		t.Errorf("runtime got servers %q, want %q", got.Servers, want)
	}
	if len(got.Searches) != policy.MaxSearchPaths {
		t.Errorf("runtime got %d searches, want %d", len(got.Searches), policy.MaxSearchPaths)
	}
	for _, limit := range []string{policy.LimitNameservers, policy.LimitSearches} {
		if n := s.counter(t, "dnsconfigurer_cri_limit_exceeded_total", map[string]string{"limit": limit, "action": "trimmed"}); n != 2 {
			t.Errorf("limit_exceeded_total{%s,trimmed} = %v, want 2", limit, n)
		}
	}
}

// TestTrimEventsOncePerWorkload: three replicas of one Deployment over
// both limits post the two DNSConfigForming Events once, on the first
// replica, naming the Deployment and the fix; the other replicas' four are
// counted, not posted (kubelet would post six).
func TestTrimEventsOncePerWorkload(t *testing.T) {
	_, ns, s, eng, admin := startShimTest(t, shimOptions{limits: cri.LimitsTrim})
	var pods []*corev1.Pod
	for _, suffix := range []string{"x2k4p", "q8w7e", "m3n4b"} {
		p := overLimitPod("web-5c6d9f-" + suffix)
		p.Labels = map[string]string{"app": "web", "pod-template-hash": "5c6d9f"}
		pods = append(pods, createPod(t, admin, ns, p))
	}
	for _, p := range pods {
		if err := runSandbox(s.client, kubeletSandbox(t, eng, p)); err != nil {
			t.Fatalf("RunPodSandbox %s: %v", p.Name, err)
		}
	}
	evs := waitEvents(t, admin, ns, string(pods[0].UID), waitBound, func(evs []corev1.Event) bool { return len(evs) == 2 })
	for _, e := range evs {
		if !strings.Contains(e.Message, "every pod of Deployment web gets this (posted once per 1h0m0s)") ||
			!strings.Contains(e.Message, "spec.template.spec.dnsConfig.") {
			t.Errorf("Event %q names neither the Deployment nor the fix", e.Message)
		}
	}
	if n := s.counter(t, "dnsconfigurer_cri_events_suppressed_total", map[string]string{"reason": policy.ReasonDNSConfigForming}); n != 4 {
		t.Errorf("events_suppressed_total = %v, want 4 (two limits, two more replicas)", n)
	}
	// The counter is taken before RunPodSandbox returns, so the four were
	// never handed to the Event recorder; the list shows none either.
	for _, p := range pods[1:] {
		if evs, err := podEvents(admin, ns, string(p.UID)); err != nil || len(evs) != 0 {
			t.Errorf("%s: Events %q (err %v), want none", p.Name, summarize(evs), err)
		}
	}
}

// TestRejectLimits: with limits reject the sandbox fails with
// InvalidArgument naming the limits, the pod and the values over them; the
// runtime never sees it, and the shim posts no Event (kubelet reports the
// failed sandbox itself).
func TestRejectLimits(t *testing.T) {
	_, ns, s, eng, admin := startShimTest(t, shimOptions{limits: cri.LimitsReject})
	pod := createPod(t, admin, ns, overLimitPod("big"))
	err := runSandbox(s.client, kubeletSandbox(t, eng, pod))
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("RunPodSandbox = %v, want InvalidArgument", err)
	}
	for _, want := range []string{
		fmt.Sprintf("pod %q (uid %s)", ns+"/big", pod.UID),
		"limits mode reject",
		"4 nameservers, at most 3 allowed; over the limit: 10.0.0.3",
		"36 search paths, at most 32 entries",
		"over the limit: s28.example s29.example s30.example s31.example",
	} {
		if !strings.Contains(st.Message(), want) {
			t.Errorf("message %q lacks %q", st.Message(), want)
		}
	}
	if s.runtime.sandbox(string(pod.UID)) != nil {
		t.Error("the runtime got the rejected sandbox")
	}
	if n := s.counter(t, "dnsconfigurer_cri_sandboxes_total", map[string]string{"source": "apiserver", "outcome": "rejected"}); n != 1 {
		t.Errorf("sandboxes_total{apiserver,rejected} = %v, want 1", n)
	}
	// An Event would have been posted within this: the trim test sees
	// its Events well within it.
	noEvents(t, admin, pod, 2*time.Second, func(e corev1.Event) bool { return true })
}

// TestNoClusterDNSNoEvent: without cluster DNS a ClusterFirst pod falls back
// to the node's resolver config, as kubelet's does. The engine warns
// MissingClusterDNS, but the shim only logs it: kubelet, which has the same
// settings, posts that Event itself. The shim's only Event is
// DNSConfigForming.
func TestNoClusterDNSNoEvent(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ns := cp.Namespace(t)
	checkGoroutines(t)
	noDNS := policy.Node{ClusterDomain: testNode.ClusterDomain}
	s := startShim(t, cp.Config(), shimOptions{node: &noDNS})
	eng, err := policy.New(noDNS)
	if err != nil {
		t.Fatal(err)
	}
	admin := newClient(t, cp.Config())
	pod := createPod(t, admin, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "plain"},
		Spec:       corev1.PodSpec{NodeName: node, DNSPolicy: corev1.DNSClusterFirst},
	})
	res, err := eng.Compute(podspec.Input(pod), testHost)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) == 0 || res.Warnings[0].Reason != policy.ReasonMissingClusterDNS {
		t.Fatalf("bad case: engine warnings %+v, want MissingClusterDNS", res.Warnings)
	}
	if err := runSandbox(s.client, kubeletSandbox(t, eng, pod)); err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	got := s.runtime.sandbox(string(pod.UID)).DnsConfig
	if strings.Join(got.Servers, " ") != strings.Join(testHost.Nameservers, " ") {
		t.Errorf("runtime got servers %q, want the node's %q", got.Servers, testHost.Nameservers)
	}
	noEvents(t, admin, pod, absenceWait, func(e corev1.Event) bool { return true })
}
