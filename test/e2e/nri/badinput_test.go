package nri_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/nriplugin"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// failOpen is the plugin's log message for a container it leaves with
// kubelet's file after an internal error.
const failOpen = `level=ERROR msg="cannot compute the pod's DNS; container created with kubelet's resolv.conf"`

// TestCorruptSandboxFile corrupts the sandbox resolv.conf that kubelet's
// DNS config was written to, which the plugin recovers the pod from
// without an API server, before the sandbox's first container: binary
// data, a nameserver that is not an address, a 100 KiB line (over the
// plugin's 64 KiB cap) and a file over 10 MiB. Each container must be
// created, with the corrupt file itself as /etc/resolv.conf (mounted from
// the sandbox directory, not the plugin's state dir; read from inside),
// no pod file, an error log line naming the pod with stage=facts, and one
// errors_total{stage="facts"} and containers_total{result="unchanged"}
// each. A sound pod afterwards still gets the plugin's file.
func TestCorruptSandboxFile(t *testing.T) {
	r := startNRI(t)
	h, c, ctx := r.h, r.c, r.ctx
	plugin := startPlugin(t, h)

	base := testPods()[0] // cluster-first
	tests := []struct {
		name, file string
		inLog      string // in the error
	}{
		{"binary", "\x00\x01\x02\xff\xfe\x7fELF\x89PNG\r\n\x1a\nnameserver 10.0.0.66\n", "not UTF-8 text"},
		{"nameserver-not-an-address", "search team.svc.cluster.local\nnameserver 10.96.0.10\nnameserver evil.example\n", `evil.example\" is not an IP address`},
		{"line-over-the-cap", "search " + strings.Repeat("a.example ", 10<<10) + "\nnameserver 10.96.0.10\n", "file too large"},
		{"over-10MiB", "nameserver 10.96.0.10\n" + strings.Repeat("#"+strings.Repeat("x", 1022)+"\n", 10<<10+1), "file too large"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := base.DeepCopy()
			pod.Name, pod.UID = tc.name, corev1UID(3000+i)
			sb := r.runPod(t, pod)
			path := sandboxResolvConf(t, h, sb.ID)
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil { // in place: the same inode
				t.Fatal(err)
			}
			ctr, err := c.StartContainer(ctx, sb, "main")
			if err != nil {
				t.Fatalf("CreateContainer on a corrupt sandbox file: %v (want the container, unchanged)", err)
			}
			if src := resolvMountRoot(ctx, t, c, ctr.ID); !strings.HasSuffix(src, "/sandboxes/"+sb.ID+"/resolv.conf") {
				t.Errorf("/etc/resolv.conf is mounted from %q, want kubelet's sandbox file %s", src, path)
			}
			if len(tc.file) < 1<<20 { // the CRI exec output is bounded
				if got, err := c.ResolvConf(ctx, ctr.ID); err != nil || got != tc.file {
					t.Errorf("/etc/resolv.conf = %q, %v; want the sandbox file as it is, %q", trim(got), err, trim(tc.file))
				}
			}
			if got, err := os.ReadFile(path); err != nil || string(got) != tc.file {
				t.Errorf("sandbox file changed (%d bytes, %v)", len(got), err)
			}
			if _, err := os.Stat(nriplugin.PodFile(plugin.StateDir, string(pod.UID))); !os.IsNotExist(err) {
				t.Errorf("pod file: %v, want none", err)
			}
			if line := logLine(plugin.Log(), failOpen, "pod=team/"+tc.name+" "); !strings.Contains(line, "stage=facts") || !strings.Contains(line, tc.inLog) {
				t.Errorf("log line %q: want stage=facts and %q", line, tc.inLog)
			}
		})
	}

	sound := testPods()[1]
	sb := r.runPod(t, sound)
	ctr, err := c.StartContainer(ctx, sb, "main")
	if err != nil {
		t.Fatal(err)
	}
	want := adjusted(t, sound)
	if got, err := c.ResolvConf(ctx, ctr.ID); err != nil || got != want {
		t.Errorf("sound pod after the corrupt ones: /etc/resolv.conf = %q, %v; want %q", got, err, want)
	}

	m := scrape(t, plugin.Metrics)
	m.Want(t, map[string]float64{
		`dnsconfigurer_nri_errors_total{stage="facts"}`:          float64(len(tests)),
		`dnsconfigurer_nri_containers_total{result="unchanged"}`: float64(len(tests)),
		`dnsconfigurer_nri_containers_total{result="adjusted"}`:  1,
	})
}

// TestUnreachableAPIServer starts the plugin with a kubeconfig whose
// server is a closed port on 127.0.0.1. It still registers with the
// runtime (dnsconfigurer_nri_connected 1) while /readyz stays 503 naming
// the pod informer. Each container waits for the pod at most the lookup
// timeout (podLookupTimeout, 1s by default), falls back to the sandbox
// file and gets the plugin's file for the pod, as without an API server;
// each counts pod_lookups_total{result="miss"} and logs a warning naming
// the pod. CreateContainer must return within containerd's NRI request
// timeout (2s by default); the test logs how long it took.
func TestUnreachableAPIServer(t *testing.T) {
	r := startNRI(t)
	h, c, ctx := r.h, r.c, r.ctx
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := "https://" + l.Addr().String()
	l.Close() // nothing listens there any more
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := apiserver.WriteKubeconfig(kubeconfig, &rest.Config{Host: server, BearerToken: "unused", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}); err != nil {
		t.Fatal(err)
	}
	plugin := startPluginUntil(t, h, (*pluginProc).connected, "--kubeconfig", kubeconfig, "--node-name", "node-1")

	resp, err := http.Get("http://" + plugin.Metrics + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "pod informer not synced") {
		t.Errorf("/readyz with the API server down = %s %q, want 503 naming the pod informer", resp.Status, body)
	}

	const lookupTimeout, nriTimeout = time.Second, 2 * time.Second
	pods := []*corev1.Pod{testPods()[0], testPods()[4]} // cluster-first, autopath
	for _, pod := range pods {
		sb := r.runPod(t, pod)
		start := time.Now()
		ctr, err := c.CreateContainer(ctx, sb, "main")
		took := time.Since(start)
		if err != nil {
			t.Fatalf("%s: CreateContainer with the API server down: %v", pod.Name, err)
		}
		t.Logf("%s: CreateContainer with the API server unreachable took %v", pod.Name, took.Round(time.Millisecond))
		if took < lookupTimeout || took >= nriTimeout {
			t.Errorf("%s: CreateContainer took %v, want the lookup timeout %v and less than the NRI timeout %v", pod.Name, took, lookupTimeout, nriTimeout)
		}
		if _, err := c.Runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr.ID}); err != nil {
			t.Fatal(err)
		}
		want := adjusted(t, pod)
		if got, err := c.ResolvConf(ctx, ctr.ID); err != nil || got != want {
			t.Errorf("%s: /etc/resolv.conf = %q, %v; want (render) %q", pod.Name, got, err, want)
		}
		if line := logLine(plugin.Log(), `level=WARN msg="pod not in the API server cache; using the sandbox resolv.conf"`, "pod=team/"+pod.Name+" "); !strings.Contains(line, "waited=1") {
			t.Errorf("fallback log line %q: want it to say it waited about 1s", line)
		}
	}

	m := scrape(t, plugin.Metrics)
	m.Want(t, map[string]float64{
		`dnsconfigurer_nri_pod_lookups_total{result="miss"}`:    2,
		`dnsconfigurer_nri_pod_lookups_total{result="hit"}`:     0,
		`dnsconfigurer_nri_containers_total{result="adjusted"}`: 2,
		`dnsconfigurer_nri_errors_total{stage="facts"}`:         0,
		`dnsconfigurer_nri_connected`:                           1,
	})
}

// sandboxResolvConf is the sandbox's resolv.conf under the harness's
// containerd root (<root>/<cri plugin>/sandboxes/<id>/resolv.conf).
func sandboxResolvConf(t *testing.T, h *containerd.Harness, id string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(h.Dir, "root", "*", "sandboxes", id, "resolv.conf"))
	if err != nil || len(m) != 1 {
		t.Fatalf("sandbox %s resolv.conf: %v, %v; want one file", id, m, err)
	}
	return m[0]
}

// logLine is the first line of log holding every one of parts, or "".
func logLine(log string, parts ...string) string {
next:
	for _, line := range strings.Split(log, "\n") {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		return line
	}
	return ""
}

func corev1UID(n int) types.UID { return types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", n)) }

// trim shortens s for a message.
func trim(s string) string {
	if len(s) > 200 {
		return s[:200] + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return s
}
