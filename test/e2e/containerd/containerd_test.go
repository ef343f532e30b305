package containerd_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

func TestSandboxDNS(t *testing.T) {
	h := containerd.Start(t, containerd.Options{})
	t.Logf("harness: %s, %s; started in %v", h.ContainerdVersion, h.RuncVersion, h.Started.Round(time.Millisecond))
	c := h.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	dns := &runtimeapi.DNSConfig{
		Servers:  []string{"10.96.0.10"},
		Searches: []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Options:  []string{"ndots:5"},
	}
	tests := []struct {
		name         string
		spec         containerd.PodSpec
		wantResolv   string
		wantHostname string
	}{
		{
			name: "pod network",
			spec: containerd.PodSpec{Name: "web", Namespace: "ns", Hostname: "web-0", DNS: dns},
			wantResolv: "search ns.svc.cluster.local svc.cluster.local cluster.local\n" +
				"nameserver 10.96.0.10\n" +
				"options ndots:5\n",
			wantHostname: "web-0",
		},
		{
			name: "host network",
			spec: containerd.PodSpec{Name: "agent", Namespace: "kube-system", HostNetwork: true, DNS: &runtimeapi.DNSConfig{
				Servers:  []string{"10.233.0.1", "10.233.0.2"},
				Searches: []string{"example.test"},
				Options:  []string{"ndots:1", "timeout:1"},
			}},
			wantResolv: "search example.test\nnameserver 10.233.0.1\nnameserver 10.233.0.2\noptions ndots:1 timeout:1\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			begin := time.Now()
			pod, err := c.RunPod(ctx, tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			ctr, err := c.StartContainer(ctx, pod, "main")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("sandbox + container running in %v", time.Since(begin).Round(time.Millisecond))

			if got := containerd.ResolvConfFor(tt.spec.DNS); got != tt.wantResolv {
				t.Errorf("ResolvConfFor = %q, want %q", got, tt.wantResolv)
			}
			got, err := c.ResolvConf(ctx, ctr.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.wantResolv {
				t.Errorf("/etc/resolv.conf = %q, want %q", got, tt.wantResolv)
			}
			host, err := c.Hostname(ctx, ctr.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.wantHostname
			if want == "" { // host network: the machine's hostname
				if want, err = os.Hostname(); err != nil {
					t.Fatal(err)
				}
			}
			if host != want {
				t.Errorf("hostname = %q, want %q", host, want)
			}

			begin = time.Now()
			if err := c.RemovePod(ctx, pod.ID); err != nil {
				t.Fatal(err)
			}
			t.Logf("sandbox stopped and removed in %v", time.Since(begin).Round(time.Millisecond))
		})
	}
}

// TestContainerLog reads a container's resolv.conf and hostname from its
// log rather than by exec, and runs the rest of the lifecycle.
func TestContainerLog(t *testing.T) {
	h := containerd.Start(t, containerd.Options{HostResolvConf: "nameserver 10.233.0.1\nsearch host.test\n"})
	c := h.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// No DNS config: containerd copies the host's resolv.conf, here the
	// harness's stand-in.
	pod, err := c.RunPod(ctx, containerd.PodSpec{Name: "logger", Hostname: "logger"})
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := c.StartContainer(ctx, pod, "report", "cat", "/etc/resolv.conf", "/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	code, err := c.WaitExit(ctx, ctr.ID)
	if err != nil || code != 0 {
		t.Fatalf("WaitExit = %d, %v", code, err)
	}
	stdout, stderr, err := c.Logs(ctr)
	if err != nil {
		t.Fatal(err)
	}
	if want := "nameserver 10.233.0.1\nsearch host.test\nlogger\n"; stdout != want || stderr != "" {
		t.Errorf("logs = %q, %q; want %q, \"\"", stdout, stderr, want)
	}

	list, err := c.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(list.Containers) != 1 {
		t.Fatalf("ListContainers = %v, %v", list, err)
	}
	if err := c.RemoveContainer(ctx, ctr.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.RemovePod(ctx, pod.ID); err != nil {
		t.Fatal(err)
	}
}

func TestParallelSandboxes(t *testing.T) {
	h := containerd.Start(t, containerd.Options{})
	c := h.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const n = 10
	begin := time.Now()
	testkit.Parallel(t, n, func(i int) error { return runAndCheck(ctx, c, i) })
	t.Logf("%d sandboxes with a container each, in parallel: %v", n, time.Since(begin).Round(time.Millisecond))
}

func runAndCheck(ctx context.Context, c *containerd.Client, i int) error {
	ns := fmt.Sprintf("ns%d", i)
	dns := &runtimeapi.DNSConfig{
		Servers:  []string{fmt.Sprintf("10.96.0.%d", 10+i)},
		Searches: []string{ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Options:  []string{"ndots:5"},
	}
	pod, err := c.RunPod(ctx, containerd.PodSpec{Name: fmt.Sprintf("pod-%d", i), Namespace: ns, Hostname: fmt.Sprintf("pod-%d", i), DNS: dns})
	if err != nil {
		return err
	}
	ctr, got, err := c.StartResolvConf(ctx, pod, "main")
	if err != nil {
		return err
	}
	if want := containerd.ResolvConfFor(dns); got != want {
		return fmt.Errorf("pod %d: /etc/resolv.conf = %q, want %q", i, got, want)
	}
	host, err := c.Hostname(ctx, ctr.ID)
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("pod-%d", i); strings.TrimSpace(host) != want {
		return fmt.Errorf("pod %d: hostname = %q, want %q", i, host, want)
	}
	return c.RemovePod(ctx, pod.ID)
}

// TestClose checks that Close leaves nothing behind: no mount, network
// namespace, process, cgroup or file of the harness.
func TestClose(t *testing.T) {
	h := containerd.Start(t, containerd.Options{})
	c := h.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Leave a running pod behind on purpose.
	pod, err := c.RunPod(ctx, containerd.PodSpec{Name: "left", Hostname: "left"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartContainer(ctx, pod, "main"); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	h.Close()
	t.Logf("Close took %v", time.Since(begin).Round(time.Millisecond))

	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), h.Dir) || strings.Contains(string(mounts), h.NetNS) {
		t.Errorf("mounts left behind:\n%s", mounts)
	}
	if _, err := os.Stat(h.NetNSPath); !os.IsNotExist(err) {
		t.Errorf("network namespace %s left behind (%v)", h.NetNSPath, err)
	}
	if _, err := os.Stat(h.Dir); !os.IsNotExist(err) {
		t.Errorf("directory %s left behind (%v)", h.Dir, err)
	}
	for _, hier := range []string{"memory", "pids", "cpu", "unified"} {
		if _, err := os.Stat("/sys/fs/cgroup/" + hier + h.CgroupParent); err == nil {
			t.Errorf("cgroup %s left behind in %s", h.CgroupParent, hier)
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		cmdline, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err == nil && strings.Contains(string(cmdline), h.Dir) {
			t.Errorf("process %s left behind: %q", p.Name(), cmdline)
		}
	}
}
