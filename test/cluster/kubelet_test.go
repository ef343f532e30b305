package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testKubelet: kubelet drives the shim. Pods created through the API reach
// Running, each dnsPolicy gives the resolv.conf kubelet would, and the
// streaming calls, deletion, a rollout and restarts of the shim and of
// kubelet all work.
func testKubelet(t *testing.T, c *Cluster) {
	t.Run("policies", func(t *testing.T) { testPolicies(t, c) })
	t.Run("streaming", func(t *testing.T) { testStreaming(t, c) })
	t.Run("rollout", func(t *testing.T) { testRollout(t, c) })
	t.Run("restarts", func(t *testing.T) { testRestarts(t, c) })
}

// testPolicies checks, inside real containers, what each dnsPolicy gives
// (with the NRI plugin as the agent, also that the container's file is the
// plugin's).
// The expectations are kubelet's rules written out for this node (cluster
// DNS 10.96.0.10, domain cluster.local, node resolv.conf "nameserver
// 10.233.0.1 / search node.test").
func testPolicies(t *testing.T, c *Cluster) {
	ns := namespace(t, c)
	node := resolvConf{nameservers: []string{NodeIP.String()}, searches: []string{"node.test"}}
	cluster := resolvConf{
		nameservers: []string{ClusterDNS.String()},
		searches:    []string{ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local", "node.test"},
		options:     []string{"ndots:5"},
	}
	ndots2 := "2"
	tests := []struct {
		name     string
		mutate   func(*corev1.Pod)
		want     resolvConf
		hostname string
	}{
		{name: "clusterfirst", want: cluster},
		{name: "default", mutate: func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSDefault }, want: node},
		{name: "none", mutate: func(p *corev1.Pod) {
			p.Spec.DNSPolicy = corev1.DNSNone
			p.Spec.DNSConfig = &corev1.PodDNSConfig{
				Nameservers: []string{"10.233.0.1"}, Searches: []string{"a.example", "b.example"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots2}, {Name: "edns0"}},
			}
		}, want: resolvConf{nameservers: []string{"10.233.0.1"}, searches: []string{"a.example", "b.example"}, options: []string{"ndots:2", "edns0"}}},
		{name: "clusterfirst-dnsconfig", mutate: func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: []string{"extra.example"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots2}}}
		}, want: resolvConf{nameservers: cluster.nameservers, searches: append(append([]string{}, cluster.searches...), "extra.example"), options: []string{"ndots:2"}}},
		// ClusterFirst on the host network falls back to Default.
		{name: "clusterfirst-hostnetwork", mutate: func(p *corev1.Pod) { p.Spec.HostNetwork = true }, want: node},
		{name: "clusterfirstwithhostnet", mutate: func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
		}, want: cluster},
		{name: "fqdn", mutate: func(p *corev1.Pod) {
			p.Spec.Hostname = "web-0"
			p.Spec.Subdomain = "web"
			fqdn := true
			p.Spec.SetHostnameAsFQDN = &fqdn
		}, want: cluster, hostname: "web-0.web." + ns + ".svc.cluster.local"},
		{name: "autopath", mutate: func(p *corev1.Pod) {
			p.Annotations = map[string]string{"dnsconfigurer.io/dns-policy": "ClusterFirstWithAutopath"}
		}, want: resolvConf{
			nameservers: []string{NodeLocalDNS.String(), ClusterDNS.String()},
			searches:    []string{"search." + ns + ".cluster.local.ap.k8s.io"},
			options:     []string{"ndots:5"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := toolsPod(tc.name)
			if tc.mutate != nil {
				tc.mutate(p)
			}
			running := runPod(t, c, ns, p)
			ctx := testContext(t, time.Minute)
			out, err := c.exec(ctx, ns, p.Name, "cat", "/etc/resolv.conf")
			if err != nil {
				t.Fatal(err)
			}
			if got := parseResolvConf(out); !got.equal(tc.want) {
				t.Errorf("/etc/resolv.conf in the container:\n%s\ngot  %s\nwant %s", out, got, tc.want)
			}
			if c.Agent == AgentNRI {
				checkNRIFile(t, c, running, out)
			}
			if tc.hostname != "" {
				out, err := c.exec(ctx, ns, p.Name, "hostname")
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.TrimSpace(out); got != tc.hostname {
					t.Errorf("hostname %q, want %q", got, tc.hostname)
				}
			}
		})
	}
}

// testStreaming: logs, exec, attach and port-forward, the calls that go
// from kube-apiserver to kubelet and on to the runtime's streaming server
// through the shim, and deletion.
func testStreaming(t *testing.T, c *Cluster) {
	ns := namespace(t, c)
	grace := int64(1)
	web := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{
				{Name: "c", Image: AgnhostImage, Args: []string{"netexec", "--http-port=8080"}},
				{Name: "cat", Image: BusyboxImage, Command: []string{"cat"}, Stdin: true, StdinOnce: true},
			},
		},
	}
	runPod(t, c, ns, web)
	ctx := testContext(t, 2*time.Minute)

	t.Run("exec", func(t *testing.T) {
		out, err := c.exec(ctx, ns, "web", "sh", "-c", "echo exec-ok $((6*7))")
		if err != nil || strings.TrimSpace(out) != "exec-ok 42" {
			t.Errorf("exec: %q, %v", out, err)
		}
	})
	t.Run("logs", func(t *testing.T) {
		// netexec logs its start-up line.
		err := waitFor(ctx, "netexec's log", func(ctx context.Context) (bool, error) {
			out, err := c.Kubectl(ctx, "-n", ns, "logs", "web", "-c", "c")
			return strings.Contains(out, "8080"), fmt.Errorf("%q %v", out, err)
		})
		if err != nil {
			t.Error(err)
		}
	})
	t.Run("attach", func(t *testing.T) {
		cmd := c.Command(ctx, c.BinDir+"/kubectl", "-n", ns, "attach", "web", "-c", "cat", "-i")
		cmd.Stdin = strings.NewReader("attached-hello\n")
		out, err := cmd.CombinedOutput()
		if !strings.Contains(string(out), "attached-hello") {
			t.Errorf("attach: %v\n%s", err, out)
		}
	})
	t.Run("port-forward", func(t *testing.T) {
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		cmd := c.Command(pctx, c.BinDir+"/kubectl", "-n", ns, "port-forward", "pod/web", "18080:8080")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || !strings.Contains(line, "Forwarding from") {
			t.Fatalf("port-forward: %q, %v", line, err)
		}
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return c.dialContext(ctx, network, "127.0.0.1:18080")
			},
		}}
		resp, err := client.Get("http://forwarded/hostname")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.TrimSpace(string(body)) != "web" {
			t.Errorf("GET /hostname through port-forward: %q, want web", body)
		}
	})
	t.Run("delete", func(t *testing.T) {
		if err := deletePod(ctx, c, ns, "web"); err != nil {
			t.Fatal(err)
		}
	})
}

// testRollout: a Deployment rolls out, and rolls to a new template.
func testRollout(t *testing.T, c *Cluster) {
	ns := namespace(t, c)
	ctx := testContext(t, 3*time.Minute)
	replicas := int32(2)
	labels := map[string]string{"app": "roll"}
	pod := toolsPod("")
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "roll", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitRollout(ctx, "deployment", ns, "roll"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, "-n", ns, "set", "env", "deployment/roll", "REV=2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, "-n", ns, "rollout", "status", "deployment/roll", "--timeout=2m"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitRollout(ctx, "deployment", ns, "roll"); err != nil {
		t.Fatal(err)
	}
}

// testRestarts: the shim and then kubelet restart under running pods; the
// pods keep running, and new pods start afterwards.
func testRestarts(t *testing.T, c *Cluster) {
	ns := namespace(t, c)
	before := runPod(t, c, ns, toolsPod("before"))
	ctx := testContext(t, 4*time.Minute)
	for _, name := range []string{"shim", "kubelet"} {
		t.Run(name, func(t *testing.T) {
			if err := c.Restart(ctx, name); err != nil {
				t.Fatal(err)
			}
			if err := c.waitNodeReady(ctx, NodeName); err != nil {
				t.Fatal(err)
			}
			after := runPod(t, c, ns, toolsPod("after-"+name))
			if after.Status.PodIP == "" {
				t.Error("new pod has no IP")
			}
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "before", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Status.Phase != corev1.PodRunning || p.Status.ContainerStatuses[0].RestartCount != 0 ||
				p.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID {
				t.Errorf("pod started before the restart: phase %s, container %s restarts %d (was %s)", p.Status.Phase,
					p.Status.ContainerStatuses[0].ContainerID, p.Status.ContainerStatuses[0].RestartCount, before.Status.ContainerStatuses[0].ContainerID)
			}
			if _, err := c.exec(ctx, ns, "before", "true"); err != nil {
				t.Errorf("exec in the pod started before the restart: %v", err)
			}
		})
	}
}
