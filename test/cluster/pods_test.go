package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// namespace creates a namespace for t, deleted at the end of t.
func namespace(t *testing.T, c *Cluster) string {
	t.Helper()
	name := "t-" + strings.ToLower(rand.String(6))
	namespaceNamed(t, c, name)
	return name
}

// toolsPod is a pod whose one container, "c", sleeps in the agnhost
// stand-in image (which has a shell, dig and getent).
func toolsPod(name string) *corev1.Pod {
	return onePod(name, AgnhostImage, []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"})
}

// onePod is a ClusterFirst pod whose one container, "c", runs command in
// image; it stops within a second.
func onePod(name, image string, command []string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{{Name: "c", Image: image, Command: command}},
		},
	}
}

// runPod creates pod in ns and waits until it is Running and Ready.
func runPod(t *testing.T, c *Cluster, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := testContext(t, 2*time.Minute)
	pod.Namespace = ns
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	got, err := waitPodRunning(ctx, c, ns, pod.Name)
	if err != nil {
		t.Fatalf("%v\n%s", err, c.describe(ns, pod.Name))
	}
	return got
}

func waitPodRunning(ctx context.Context, c *Cluster, ns, name string) (*corev1.Pod, error) {
	var got *corev1.Pod
	err := waitFor(ctx, "pod "+ns+"/"+name+" Running", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = p
		if p.Status.Phase != corev1.PodRunning {
			return false, fmt.Errorf("phase %s", p.Status.Phase)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("not Ready")
	})
	return got, err
}

// describe returns kubectl describe of a pod and the namespace's events,
// for failure messages.
func (c *Cluster) describe(ns, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _ := c.Kubectl(ctx, "-n", ns, "describe", "pod", name)
	return out
}

// exec runs a command in a pod's container with kubectl exec, through
// kube-apiserver, kubelet, the shim and containerd's streaming server.
func (c *Cluster) exec(ctx context.Context, ns, pod string, cmd ...string) (string, error) {
	return c.Kubectl(ctx, append([]string{"-n", ns, "exec", pod, "-c", "c", "--"}, cmd...)...)
}

// resolvConf is a parsed /etc/resolv.conf.
type resolvConf struct {
	nameservers, searches, options []string
}

func parseResolvConf(s string) resolvConf {
	var r resolvConf
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			r.nameservers = append(r.nameservers, f[1:]...)
		case "search":
			r.searches = append(r.searches, f[1:]...)
		case "options":
			r.options = append(r.options, f[1:]...)
		}
	}
	return r
}

// equal compares options as a set: kubelet renders a pod's options from a
// map, and the shim passes kubelet's own config on untouched.
func (r resolvConf) equal(o resolvConf) bool {
	return slices.Equal(r.nameservers, o.nameservers) && slices.Equal(r.searches, o.searches) && policy.SameOptions(r.options, o.options)
}

func (r resolvConf) String() string {
	return fmt.Sprintf("nameservers %q, searches %q, options %q", r.nameservers, r.searches, r.options)
}

// deletePod deletes a pod and waits until it is gone.
func deletePod(ctx context.Context, c *Cluster, ns, name string) error {
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return waitFor(ctx, "pod "+ns+"/"+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
