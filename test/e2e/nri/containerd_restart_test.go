package nri_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nriplugin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// TestContainerdRestart restarts containerd (h.Restart: the same root,
// state, config and sockets; the shims and containers keep running) under
// a running plugin. The plugin must notice and register again by itself:
// /readyz goes unready, then ready, dnsconfigurer_nri_connected is 1 and
// it logged a second connection and a second Synchronize. The resync keeps
// the state of the pods containerd recovered and removes a directory of a
// pod it does not have. Containers created before the restart keep the
// plugin's file (read from inside; its mount source, the pod file, still
// exists with the same inode and content); new containers of those pods,
// and of a pod run after the restart, get the plugin's file.
func TestContainerdRestart(t *testing.T) {
	r := startNRI(t)
	h, c, ctx := r.h, r.c, r.ctx
	plugin := startPlugin(t, h)

	pods := testPods()
	kept := []*corev1.Pod{pods[0], pods[4]} // cluster-first; autopath, whose file differs most from kubelet's
	after := pods[1]                        // cluster-first-config, run after the restart

	type before struct {
		sb    *containerd.Pod
		ctrID string
		file  string
		inode uint64
	}
	var old []before
	for _, pod := range kept {
		sb := r.runPod(t, pod)
		ctr, err := c.StartContainer(ctx, sb, "before")
		if err != nil {
			t.Fatal(err)
		}
		r.check(t, pod.Name+": container created before the restart", ctr.ID, adjusted(t, pod))
		file := nriplugin.PodFile(plugin.StateDir, string(pod.UID))
		if src := resolvMountRoot(ctx, t, c, ctr.ID); !strings.HasSuffix(file, src) {
			t.Errorf("%s: /etc/resolv.conf is mounted from %q, want the pod file %s", pod.Name, src, file)
		}
		old = append(old, before{sb, ctr.ID, file, inodeOf(t, file)})
	}
	// A pod the runtime does not have: the resync at the new connection
	// must remove its directory.
	stale := filepath.Join(plugin.StateDir, "00000000-0000-4000-8000-000000009999")
	if err := os.MkdirAll(stale, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "resolv.conf"), []byte("nameserver 10.0.0.99\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	watch := watchReady(ctx, t, plugin)
	begin := time.Now()
	if err := h.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	containerdUp := time.Since(begin)
	var unreadyAt, readyAt time.Time
	select {
	case r := <-watch:
		unreadyAt, readyAt = r.unready, r.ready
	case <-time.After(60 * time.Second):
		t.Fatalf("plugin not ready again 60s after containerd came back:\n%s", plugin.Log())
	}
	t.Logf("containerd restart: Restart returned (CRI ready) after %v; plugin /readyz failed %v after the stop and passed again %v after it",
		containerdUp.Round(time.Millisecond), unreadyAt.Sub(begin).Round(time.Millisecond), readyAt.Sub(begin).Round(time.Millisecond))

	m := scrape(t, plugin.Metrics)
	if got := m["dnsconfigurer_nri_connected"]; got != 1 {
		t.Errorf("dnsconfigurer_nri_connected = %v after the reconnection, want 1", got)
	}
	log := plugin.Log()
	for what, want := range map[string]int{`msg="connected to the runtime"`: 2, `msg="not connected to the runtime; registering again"`: 1} {
		if n := strings.Count(log, what); n < want {
			t.Errorf("plugin log has %d lines %s, want at least %d", n, what, want)
		}
	}
	testkit.WaitFor(t, 30*time.Second, func() error {
		if strings.Count(plugin.Log(), `msg=synchronized`) < 2 || exists(stale) {
			return fmt.Errorf("no second Synchronize removing %s:\n%s", stale, plugin.Log())
		}
		return nil
	})

	for i, pod := range kept {
		o := old[i]
		r.check(t, pod.Name+": container created before the restart, after it", o.ctrID, adjusted(t, pod))
		if got, err := os.ReadFile(o.file); err != nil || string(got) != adjusted(t, pod) {
			t.Errorf("%s: pod file after the restart = %q, %v; want %q", pod.Name, got, err, adjusted(t, pod))
		} else if ino := inodeOf(t, o.file); ino != o.inode {
			t.Errorf("%s: pod file inode %d → %d across the restart: the old container's mount is not the file any more", pod.Name, o.inode, ino)
		}
		ctr, err := c.StartContainer(ctx, o.sb, "after")
		if err != nil {
			t.Fatal(err)
		}
		r.check(t, pod.Name+": new container after the restart", ctr.ID, adjusted(t, pod))
	}
	sb := r.runPod(t, after)
	ctr, err := c.StartContainer(ctx, sb, "main")
	if err != nil {
		t.Fatal(err)
	}
	r.check(t, "container of a pod run after the restart", ctr.ID, adjusted(t, after))

	m = scrape(t, plugin.Metrics)
	m.Want(t, map[string]float64{
		`dnsconfigurer_nri_containers_total{result="adjusted"}`:  5, // 2 before, 3 after: the same process
		`dnsconfigurer_nri_containers_total{result="unchanged"}`: 0,
		`dnsconfigurer_nri_errors_total{stage="prune"}`:          0,
		`dnsconfigurer_nri_errors_total{stage="facts"}`:          0,
		`dnsconfigurer_nri_connected`:                            1,
	})
}

// readyChange is when /readyz first failed and then first passed again.
type readyChange struct{ unready, ready time.Time }

// watchReady polls the plugin's /readyz every 10ms: it waits for a first
// OK, then reports once it has seen it fail and pass again.
func watchReady(ctx context.Context, t *testing.T, p *pluginProc) <-chan readyChange {
	t.Helper()
	testkit.WaitEqual(t, 20*time.Second, "plugin ready before the restart", p.ready, true)
	ch := make(chan readyChange, 1)
	go func() {
		var r readyChange
		testkit.Every(ctx, 10*time.Millisecond, func() bool {
			ok := p.ready()
			switch {
			case !ok && r.unready.IsZero():
				r.unready = time.Now()
			case ok && !r.unready.IsZero():
				r.ready = time.Now()
				ch <- r
				return false
			}
			return true
		})
	}()
	return ch
}

// resolvMountRoot is the root (the source path in its file system) of the
// container's /etc/resolv.conf mount, from its /proc/self/mountinfo.
func resolvMountRoot(ctx context.Context, t *testing.T, c *containerd.Client, id string) string {
	t.Helper()
	out, err := c.Testbin(ctx, id, "cat", "/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT ...
		if f := strings.Fields(line); len(f) > 4 && f[4] == "/etc/resolv.conf" {
			return f[3]
		}
	}
	t.Fatalf("no /etc/resolv.conf mount in the container:\n%s", out)
	return ""
}

func inodeOf(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
