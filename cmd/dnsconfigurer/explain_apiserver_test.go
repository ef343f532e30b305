package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/explain"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// fakeAgent stands in for the port-forward and exec adapters: a control
// plane without a kubelet cannot run them. It records which agent pod and
// port explain asked.
type fakeAgent struct {
	mu       sync.Mutex
	settings nodesettings.Settings
	file     string
	err      error
	asked    []string
}

func (f *fakeAgent) NodeSettings(_ context.Context, agent *corev1.Pod, port int32) (nodesettings.Settings, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, fmt.Sprintf("%s:%d", agent.Name, port))
	return f.settings, f.err
}

func (f *fakeAgent) ResolvConf(context.Context, *corev1.Pod, string) ([]byte, error) {
	return []byte(f.file), nil
}

// TestExplainAPIServer runs `explain` against a real kube-apiserver with
// the agent's settings and the containers' files faked: the pod lookup,
// the agent pod found by node (the shim on node-a, not the nri on
// node-b), its metrics port, the namespace label read when the agent
// reads labels, and the errors for a missing pod, an unscheduled pod and a
// node without an agent. The real port-forward adapter, for a user without
// pods/portforward, fails naming the verb.
func TestExplainAPIServer(t *testing.T) {
	cp := apiserver.StartT(t)
	ctx := t.Context()
	client := cp.Client()
	agentNS, ns := cp.Namespace(t), cp.Namespace(t)
	_, err := client.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"`+v1alpha1.LabelDNSPolicy+`":"ClusterFirstWithAutopath"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createPod(t, client, agentNS, "shim-a", "node-a", "shim", 9310, corev1.PodRunning)
	createPod(t, client, agentNS, "nri-b", "node-b", "nri", 9311, corev1.PodRunning)
	createPod(t, client, ns, "web", "node-a", "", 0, corev1.PodRunning)
	createPod(t, client, ns, "pending", "", "", 0, "")
	createPod(t, client, ns, "lonely", "node-c", "", 0, "")

	fake := &fakeAgent{settings: explainSettings(func(s *nodesettings.Settings) { s.PodPolicy.NamespaceLabels = true }),
		file: "nameserver 10.96.0.10\nsearch search." + ns + ".cluster.local.ap.k8s.io\noptions ndots:5\n"}
	restore := explainAdapters
	t.Cleanup(func() { explainAdapters = restore })
	explainAdapters = func(*rest.Config, kubernetes.Interface) (explain.SettingsFetcher, explain.ResolvReader) {
		return fake, fake
	}
	kc := cp.Kubeconfig()

	code, stdout, stderr := run(t, "", "explain", "web", "-n", ns, "--kubeconfig", kc, "--agent-namespace", agentNS, "-o", "json")
	if code != exitOK {
		t.Fatalf("explain web: exit %d\n%s", code, stderr)
	}
	var got explainJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	wantSearch := "search." + ns + ".cluster.local.ap.k8s.io"
	if got.Agent != agentNS+"/shim-a" || got.NodeName != "node-a" || len(got.Searches) != 1 || got.Searches[0] != wantSearch {
		t.Errorf("explain web: agent %q, node %q, searches %v; want the shim on node-a and %s (the namespace label)", got.Agent, got.NodeName, got.Searches, wantSearch)
	}
	if len(got.Containers) != 1 || got.Containers[0].Status != "matches" {
		t.Errorf("containers = %+v, want app matches", got.Containers)
	}
	if strings.Join(fake.asked, ",") != "shim-a:9310" {
		t.Errorf("agents asked: %v, want shim-a:9310", fake.asked)
	}

	for _, tc := range []struct{ pod, want string }{
		{"missing", `explain: pod "missing" not found in namespace "` + ns + `"`},
		{"pending", "is not scheduled to a node yet (spec.nodeName is empty)"},
		{"lonely", `no agent pod on node "node-c": no pod in namespace "` + agentNS + `" matches labelSelector "app.kubernetes.io/component in (shim,nri)" and fieldSelector "spec.nodeName=node-c"`},
	} {
		code, _, stderr := run(t, "", "explain", tc.pod, "-n", ns, "--kubeconfig", kc, "--agent-namespace", agentNS, "--no-exec")
		if code != exitFail || !strings.Contains(stderr, tc.want) {
			t.Errorf("explain %s: exit %d, stderr %q; want %d and %q", tc.pod, code, stderr, exitFail, tc.want)
		}
	}

	// An agent's HTTP status line is the agent's text: escaped.
	fake.err = errors.New("GET /node-settings: 500 \x1b[2J\u009b")
	code, _, stderr = run(t, "", "explain", "web", "-n", ns, "--kubeconfig", kc, "--agent-namespace", agentNS)
	if want := `GET /node-settings: 500 \x1b[2J\u009b`; code != exitFail || !strings.Contains(stderr, want) {
		t.Errorf("a hostile agent's status: exit %d, stderr %q; want %d and %q", code, stderr, exitFail, want)
	}

	fake.err = explain.ErrAgentTooOld
	code, _, stderr = run(t, "", "explain", "web", "-n", ns, "--kubeconfig", kc, "--agent-namespace", agentNS)
	if want := "agent pod " + agentNS + "/shim-a serves no /node-settings: it is older than this explain"; code != exitFail || !strings.Contains(stderr, want) {
		t.Errorf("an old agent: exit %d, stderr %q; want %d and %q", code, stderr, exitFail, want)
	}

	// The real adapters, for a user who may read pods but not port-forward.
	explainAdapters = restore
	grant(t, client, "explain-reader", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: []string{"get", "list"}}})
	userKC := filepath.Join(t.TempDir(), "kubeconfig")
	userCfg := cp.ConfigAs("explain-reader")
	if err := apiserver.WriteKubeconfig(userKC, userCfg); err != nil {
		t.Fatal(err)
	}
	// RBAC's informer sees the binding soon after it is written.
	user := kubernetes.NewForConfigOrDie(userCfg)
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := user.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the reader's role is not in effect: %v", err)
	}
	code, _, stderr = run(t, "", "explain", "web", "-n", ns, "--kubeconfig", userKC, "--agent-namespace", agentNS, "--timeout", "20s")
	if want := "RBAC: explain needs create pods/portforward in namespace " + agentNS; code != exitFail || !strings.Contains(stderr, want) {
		t.Errorf("explain as a reader: exit %d, stderr %q; want %d and %q", code, stderr, exitFail, want)
	}
	t.Logf("explain as a reader: %s", stderr)
}

// createPod creates a pod on node ("" unscheduled); with component, an
// agent pod with that label and a "metrics" port.
func createPod(t *testing.T, client kubernetes.Interface, ns, name, node, component string, port int32, phase corev1.PodPhase) {
	t.Helper()
	c := corev1.Container{Name: "app", Image: "app"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{NodeName: node}}
	if component != "" {
		pod.Labels = map[string]string{"app.kubernetes.io/component": component}
		c.Ports = []corev1.ContainerPort{{Name: explain.AgentPortName, ContainerPort: port}}
		pod.Spec.HostNetwork = true
	}
	pod.Spec.Containers = []corev1.Container{c}
	pod, err := client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if phase == "" {
		return
	}
	pod.Status.Phase = phase
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// grant binds a ClusterRole of rules to user.
func grant(t *testing.T, client kubernetes.Interface, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	if _, err := client.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(t.Context(), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
