package nri_test

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/nriplugin"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/testpod"
)

// testPods are one pod per dnsPolicy, the autopath annotation and a
// host-network pod.
func testPods() []*corev1.Pod {
	pod := func(i int, name string, dnsPolicy corev1.DNSPolicy, mutate ...func(*corev1.Pod)) *corev1.Pod {
		return testpod.New(name, 1000+i, dnsPolicy, containerd.TestImage, mutate...)
	}
	return []*corev1.Pod{
		pod(1, "cluster-first", corev1.DNSClusterFirst),
		pod(2, "cluster-first-config", corev1.DNSClusterFirst, testpod.WithConfig),
		pod(3, "default", corev1.DNSDefault),
		pod(4, "none", corev1.DNSNone, testpod.OnlyConfig),
		pod(5, "autopath", corev1.DNSClusterFirst, testpod.Autopath),
		pod(6, "autopath-config", corev1.DNSClusterFirst, testpod.Autopath, testpod.WithConfig),
		pod(7, "hostnet-with-hostnet", corev1.DNSClusterFirstWithHostNet, testpod.HostNetwork),
	}
}

// sandboxSpec is the sandbox config kubelet sends for pod: kubelet's DNS
// (render's for the pod without the autopath annotation, which kubelet
// does not know), its hostname and the pod annotations.
func sandboxSpec(t testing.TB, pod *corev1.Pod) containerd.PodSpec {
	kubelet := pod.DeepCopy()
	delete(kubelet.Annotations, policy.AnnotationDNSPolicy)
	k := render(t, kubelet)
	spec := containerd.PodSpec{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID), HostNetwork: pod.Spec.HostNetwork,
		DNS: k.DNSConfig(), Annotations: pod.Annotations}
	if !pod.Spec.HostNetwork {
		spec.Hostname = k.Hostname
	}
	return spec
}

// TestPolicies runs a pod of each dnsPolicy, and with the autopath
// annotation, with the plugin on containerd's NRI socket and no API
// server: each container's /etc/resolv.conf must be the plugin's file
// holding what `dnsconfigurer render` gives for the pod, a second
// container of a pod must see the same, and the state dir must be empty
// once the pods are removed.
func TestPolicies(t *testing.T) {
	r := startNRI(t)
	h, c, ctx := r.h, r.c, r.ctx
	plugin := startPlugin(t, h)
	for _, pod := range testPods() {
		t.Run(pod.Name, func(t *testing.T) {
			want := adjusted(t, pod)
			sb, err := c.RunPod(ctx, sandboxSpec(t, pod))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := c.RemovePod(context.WithoutCancel(ctx), sb.ID); err != nil {
					t.Error(err)
				}
				if _, err := os.Stat(nriplugin.PodFile(plugin.StateDir, string(pod.UID))); !os.IsNotExist(err) {
					t.Errorf("pod file after RemovePodSandbox: %v, want it gone", err)
				}
			}()
			for _, name := range []string{"main", "sidecar"} {
				ctr, err := c.StartContainer(ctx, sb, name)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.ResolvConf(ctx, ctr.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("%s: /etc/resolv.conf =\n%s\nwant (render)\n%s", name, got, want)
				}
			}
			file, err := os.ReadFile(nriplugin.PodFile(plugin.StateDir, string(pod.UID)))
			if err != nil || string(file) != want {
				t.Errorf("state file = %q, %v; want %q", file, err, want)
			}
		})
	}
	entries, err := os.ReadDir(plugin.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("state dir after the pods are gone: %v entries, want none", len(entries))
	}
}
