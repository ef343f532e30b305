package dnsserver_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// catchUpBound is how long the answers may take to catch up once the API
// server is back: client-go's reflectors retry a failed list or watch with
// an exponential backoff capped at 30s, so the longer the outage the longer
// the first retry after it can be.
const catchUpBound = 45 * time.Second

// relistLog records what a feed tells Cluster.Relisting.
type relistLog struct {
	mu   sync.Mutex
	told []bool
}

func (l *relistLog) tell(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.told = append(l.told, on)
}

func (l *relistLog) get() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.told)
}

// TestAPIServerRestart stops the kube-apiserver under a synced server: the
// server keeps answering from its last state and stays ready while its
// informers fail to reach the API; after the restart it catches up with
// objects written, changed and deleted then. The relist after the restart
// is told to Cluster.Relisting (serve bounds its memory by it) from its
// start to its end, and the first sync's lists are not.
func TestAPIServerRestart(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	var relists relistLog
	ns, client, srv := syncedServer(t, cp, func(c *kubefeed.Cluster) { c.Relisting = relists.tell })
	if got := relists.get(); len(got) != 0 {
		t.Errorf("the first sync told Relisting %v, want nothing", got)
	}
	ctx := t.Context()
	name := func(s string) string { return s + "." + ns + ".svc." + zone + "." }

	before := createService(t, client, ns, "before", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}})
	slice := createHeadless(t, client, ns, "headless", "10.244.5.1")
	pod := createPod(t, client, ns, "app")
	setPodStatus(t, client, pod, corev1.PodRunning, "10.244.5.9")
	podName := "10-244-5-9." + ns + ".pod." + zone + "."
	state := map[string]string{
		name("before"):   "NOERROR A " + before.Spec.ClusterIP,
		name("headless"): "NOERROR A 10.244.5.1",
		podName:          "NOERROR A 10.244.5.9",
		name("after"):    "NXDOMAIN",
	}
	for n, want := range state {
		waitAnswer(t, srv.addr, n, dns.TypeA, want)
	}

	down := time.Now()
	if err := cp.StopAPIServer(); err != nil {
		t.Fatalf("stop kube-apiserver: %v", err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			// Leave the API server up for the package's other tests.
			if err := cp.StartAPIServer(context.Background()); err != nil {
				t.Errorf("start kube-apiserver: %v", err)
			}
		}
	})
	// Wait until the informers have failed to reach the API server a few
	// times (their watches broke and the relists are refused), asking the
	// questions in between: the answers and readiness do not change.
	failed := func(r apiserver.Request) bool { return r.Err != nil }
	first := srv.requests.Count(failed) + 1
	for n := first; n < first+6; n++ {
		waitRequests(t, srv.requests, n, "failing while the API server is down", failed)
		for q, want := range state {
			mustAnswer(t, srv.addr, q, dns.TypeA, want)
		}
		if !srv.handler.Synced() || srv.readyz() != http.StatusOK {
			t.Fatalf("not ready while the API server is down: synced %v, /readyz %d", srv.handler.Synced(), srv.readyz())
		}
	}
	t.Logf("API server down %v: %d API requests failed; answers and /readyz unchanged", time.Since(down).Round(time.Millisecond), srv.requests.Count(failed))

	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	restarted = true
	up := time.Now()
	// Written after the restart: a new Service, a deleted one, a moved
	// endpoint and a deleted pod.
	after := createService(t, client, ns, "after", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}})
	if err := client.CoreV1().Services(ns).Delete(ctx, "before", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	slice.Endpoints[0].Addresses = []string{"10.244.5.2"}
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods(ns).Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]string{
		name("after"):    "NOERROR A " + after.Spec.ClusterIP,
		name("before"):   "NXDOMAIN",
		name("headless"): "NOERROR A 10.244.5.2",
		podName:          "NXDOMAIN",
	} {
		waitAnswerWithin(t, catchUpBound, srv.addr, n, dns.TypeA, want)
		t.Logf("%s caught up %v after the API server was back", n, time.Since(up).Round(time.Millisecond))
	}
	// The relist streamed and ended: on, then off (once per relist).
	testkit.WaitFor(t, catchUpBound, func() error {
		got := relists.get()
		if len(got) < 2 || len(got)%2 != 0 || got[len(got)-1] {
			return fmt.Errorf("Relisting told %v, want true, false (a relist, whole)", got)
		}
		for i, on := range got {
			if on != (i%2 == 0) {
				return fmt.Errorf("Relisting told %v, want true and false in turn", got)
			}
		}
		return nil
	})
	t.Logf("Relisting told %v", relists.get())
}
