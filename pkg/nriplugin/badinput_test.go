package nriplugin

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
)

// textLogger logs text to b.
func textLogger(b *testkit.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// TestBadSandboxFile gives CreateContainer sandbox files containerd cannot
// have written from kubelet's config. Each must leave the container
// unchanged (kubelet's file), write no pod file, count one facts error and
// one unchanged container, and log the pod and the cause. Binary data and
// a nameserver that is not an address used to be "recovered" as a config
// of their own (an empty file; the junk nameserver copied).
func TestBadSandboxFile(t *testing.T) {
	tests := []struct {
		name, file, inLog string
	}{
		{"binary", "\x00\x01\xff\xfe\x7f\xde\xad\xbe\xef\n\x89PNG\r\n", "not UTF-8 text"},
		{"nul in a valid file", clusterFirst + "\x00\n", "control character U+0000"},
		{"control character", "nameserver 10.96.0.10\x1b[2J\n", "control character U+001B"},
		{"nameserver not an address", "nameserver 10.96.0.10\nnameserver 1.2.3.4;rm\n", `1.2.3.4;rm\" is not an IP address`},
		{"nameserver without address", "nameserver\n", "nameserver list is empty"},
		{"over the 64 KiB cap", "search " + strings.Repeat("a.example ", 7000) + "\nnameserver 10.96.0.10\n", "file too large"},
		{"10 MiB", strings.Repeat("# padding line of a file far too large\n", (10<<20)/39+1), "file too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs testkit.Buffer
			reg := prometheus.NewRegistry()
			p := newPlugin(t, WithRegistry(reg), WithLogger(textLogger(&logs)))
			pod, ctr := sandbox(t, "u-bad", tt.file, nil, false)
			adj, upd, err := p.CreateContainer(context.Background(), pod, ctr)
			if err != nil || adj != nil || upd != nil {
				t.Fatalf("CreateContainer = %v, %v, %v; want no adjustment and no error (kubelet's file)", adj, upd, err)
			}
			if _, err := os.Stat(PodFile(p.stateDir, "u-bad")); !os.IsNotExist(err) {
				t.Errorf("pod file: %v, want none", err)
			}
			if got := testutil.ToFloat64(p.m.errors.WithLabelValues(stageFacts)); got != 1 {
				t.Errorf("errors_total{stage=facts} = %v, want 1", got)
			}
			if got := testutil.ToFloat64(p.m.containers.WithLabelValues(resultUnchanged)); got != 1 {
				t.Errorf("containers_total{result=unchanged} = %v, want 1", got)
			}
			log := logs.String()
			for _, want := range []string{"level=ERROR", "cannot compute the pod's DNS; container created with kubelet's resolv.conf",
				"pod=team/web", "uid=u-bad", "stage=facts", tt.inLog} {
				if !strings.Contains(log, want) {
					t.Errorf("log lacks %q:\n%s", want, log)
				}
			}
		})
	}
}

// TestPodDeletedMidCreation runs the real pod informer on a fake API
// server. A pod deleted after its first container was adjusted from the
// API server: the next container waits at most the lookup timeout, counts
// a miss, falls back to kubelet's sandbox file and gets the same file (the
// same inode: running containers are not disturbed). A pod absent from the
// start (deleted before the informer listed it) gets the file recovered
// from the sandbox file, also within the timeout.
func TestPodDeletedMidCreation(t *testing.T) {
	const timeout = 300 * time.Millisecond
	client := fake.NewClientset(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: types.UID("u-deleted")},
		Spec:       corev1.PodSpec{NodeName: "node-1", DNSPolicy: corev1.DNSClusterFirst},
	})
	var logs testkit.Buffer
	inf, err := podfacts.NewPodInformer(client, "node-1", textLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Start(t, inf.Run)
	ctx := context.Background()
	known := func(uid string) bool { // no wait: an expired context
		expired, cancel := context.WithTimeout(ctx, 0)
		defer cancel()
		_, ok := inf.PodFor(expired, podfacts.SandboxPod{Namespace: "team", Name: "web", UID: uid})
		return ok
	}
	testkit.WaitEqual(t, 10*time.Second, "the informer knows the pod", func() bool { return known("u-deleted") }, true)

	reg := prometheus.NewRegistry()
	p := newPlugin(t, WithRegistry(reg), WithLogger(textLogger(&logs)), WithPodLookup(inf, timeout))
	want := Header("team", "web") + clusterFirst
	create := func(pod *corev1.Pod, uid, ctrID string) (string, time.Duration) {
		t.Helper()
		sb, ctr := sandbox(t, uid, clusterFirst, nil, false)
		ctr.Id = ctrID
		start := time.Now()
		adj, _, err := p.CreateContainer(ctx, sb, ctr)
		took := time.Since(start)
		if err != nil || len(adj.GetMounts()) != 1 {
			t.Fatalf("CreateContainer %s = %v, %v; want the pod file mounted", ctrID, adj, err)
		}
		return adj.GetMounts()[0].GetSource(), took
	}
	lookups := func(result string) float64 { return testutil.ToFloat64(p.m.lookups.WithLabelValues(result)) }

	path, took := create(nil, "u-deleted", "c1")
	if lookups(lookupHit) != 1 || took >= timeout {
		t.Errorf("first container: lookup hits %v, took %v; want 1 hit without waiting", lookups(lookupHit), took)
	}
	checkFile(t, path, want)
	before := inode(t, path)

	if err := client.CoreV1().Pods("team").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEqual(t, 10*time.Second, "the informer knows the deleted pod", func() bool { return known("u-deleted") }, false)
	path, took = create(nil, "u-deleted", "c2")
	if lookups(lookupMiss) != 1 {
		t.Errorf("lookup misses = %v, want 1", lookups(lookupMiss))
	}
	if took < timeout || took > timeout+2*time.Second {
		t.Errorf("CreateContainer after the deletion took %v, want the lookup timeout %v (and not much more)", took, timeout)
	}
	checkFile(t, path, want)
	if after := inode(t, path); after != before {
		t.Errorf("pod file inode %d → %d: running containers lost their file", before, after)
	}

	path, took = create(nil, "u-never", "c3")
	if lookups(lookupMiss) != 2 || took > timeout+2*time.Second {
		t.Errorf("pod never in the API server: misses %v, took %v", lookups(lookupMiss), took)
	}
	checkFile(t, path, want)
	log := logs.String()
	for _, uid := range []string{"u-deleted", "u-never"} {
		if !strings.Contains(log, `level=WARN msg="pod not in the API server cache; using the sandbox resolv.conf" component=nri pod=team/web uid=`+uid) {
			t.Errorf("no fallback log line for %s:\n%s", uid, log)
		}
	}
	if got := testutil.ToFloat64(p.m.errors.WithLabelValues(stageFacts)); got != 0 {
		t.Errorf("errors_total{stage=facts} = %v, want 0", got)
	}
}

func checkFile(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Errorf("%s = %q, %v; want %q", path, got, err, want)
	}
}
