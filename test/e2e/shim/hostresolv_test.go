package shim_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// TestHostResolvConfLive rewrites the node resolver file under a running
// shim: Default-policy pods started after get the new nameservers without a
// restart, and a broken file leaves them on the last good copy.
func TestHostResolvConfLive(t *testing.T) {
	h := containerd.Start(t, containerd.Options{HostResolvConf: testkit.HostResolvConf})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var pods []*corev1.Pod
	for i := range 3 {
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("default-%d", i), Namespace: "team", UID: types.UID(fmt.Sprintf("uid-default-%d", i))},
			Spec:       corev1.PodSpec{NodeName: "node-1", DNSPolicy: corev1.DNSDefault},
		})
	}
	sock, w := startInProcessShim(t, ctx, h, pods)
	resolv := w.Current().Path
	waitFor := func(what string, cond func(hostresolv.Snapshot) bool) {
		t.Helper()
		testkit.WaitFor(t, 5*time.Second, func() error {
			if s := w.Current(); !cond(s) {
				return fmt.Errorf("watcher: %s: not seen (%+v)", what, s)
			}
			return nil
		})
	}
	c := h.Dial(sock)
	run := func(pod *corev1.Pod) string {
		t.Helper()
		// kubelet read the node file at start: its view is the original.
		sb, err := c.RunPod(ctx, sandboxSpec(t, pod, false))
		if err != nil {
			t.Fatal(err)
		}
		defer c.RemovePod(context.WithoutCancel(ctx), sb.ID)
		_, got, err := c.StartResolvConf(ctx, sb, "main")
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := run(pods[0]); got != "search host.test corp.test\nnameserver 10.233.0.1\nnameserver 10.233.0.2\noptions timeout:2 attempts:3\n" {
		t.Errorf("before the change: %q", got)
	}

	// In-place rewrite; the watcher picks it up within its debounce.
	if err := os.WriteFile(resolv, []byte("nameserver 10.233.0.7\nsearch new.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "search new.test\nnameserver 10.233.0.7\n"
	waitFor("the new file", func(s hostresolv.Snapshot) bool {
		return len(s.Config.Nameservers) == 1 && s.Config.Nameservers[0] == "10.233.0.7"
	})
	if got := run(pods[1]); got != want {
		t.Errorf("after the change: %q, want %q", got, want)
	}

	// A broken file (a bare nameserver line) keeps the last good copy.
	if err := os.WriteFile(resolv, []byte("nameserver\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor("the broken file", func(s hostresolv.Snapshot) bool { return s.Problem != nil })
	if got := run(pods[2]); got != want {
		t.Errorf("with a broken file: %q, want the last good %q", got, want)
	}
}
