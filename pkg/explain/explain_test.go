package explain

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
)

// fakeAgent is the port-forward and exec adapters in one.
type fakeAgent struct {
	settings nodesettings.Settings
	err      error
	asked    string
}

func (f *fakeAgent) NodeSettings(_ context.Context, agent *corev1.Pod, port int32) (nodesettings.Settings, error) {
	f.asked = agent.Name
	return f.settings, f.err
}

func (f *fakeAgent) ResolvConf(context.Context, *corev1.Pod, string) ([]byte, error) {
	return []byte("nameserver 10.96.0.10\n"), nil
}

func running(name string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

// TestGather reads a pod, its agent (a running one first), the
// namespace label and each container's file, with fakes for the agent.
func TestGather(t *testing.T) {
	agent := func(name, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: DefaultAgentNamespace,
			Labels: map[string]string{"app.kubernetes.io/component": "shim"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "shim",
				Ports: []corev1.ContainerPort{{Name: AgentPortName, ContainerPort: 9310}}}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app"}, {Name: "init"}, {Name: "new"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{running("app"),
			{Name: "init", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}}}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "shop"}}
	lonely := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lonely", Namespace: "shop"}, Spec: corev1.PodSpec{NodeName: "node-c"}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{v1alpha1.LabelDNSPolicy: "ClusterFirstWithAutopath"}}}
	client := fake.NewClientset(web, pending, lonely, ns, agent("shim-old", "node-a", corev1.PodFailed), agent("shim-a", "node-a", corev1.PodRunning))
	fa := &fakeAgent{settings: nodesettings.Settings{Kind: nodesettings.KindShim, PodPolicy: v1alpha1.PodPolicy{NamespaceLabels: true}}}
	e := Explainer{Client: client, Settings: fa, Resolv: fa, AgentNamespace: DefaultAgentNamespace, Timeout: time.Minute}

	f, err := e.Gather(t.Context(), "shop", "web")
	if err != nil {
		t.Fatal(err)
	}
	if f.Agent != DefaultAgentNamespace+"/shim-a" || fa.asked != "shim-a" || f.NamespacePolicy != "ClusterFirstWithAutopath" {
		t.Errorf("agent %q (asked %q), namespace policy %q; want the running shim-a and the label", f.Agent, fa.asked, f.NamespacePolicy)
	}
	var got []string
	for _, c := range f.Containers {
		s := c.Name + ": " + string(c.Data)
		if c.Err != nil {
			s = c.Name + ": " + c.Err.Error()
		}
		got = append(got, s)
	}
	want := "app: nameserver 10.96.0.10\n|init: not running (waiting: ImagePullBackOff)|new: not running (no status yet)"
	if strings.Join(got, "|") != want {
		t.Errorf("containers %q, want %q", strings.Join(got, "|"), want)
	}

	fa.err = ErrAgentTooOld
	for _, tc := range []struct{ pod, want string }{
		{"missing", `pod "missing" not found in namespace "shop"`},
		{"pending", "pod shop/pending is not scheduled to a node yet"},
		{"web", "agent pod " + DefaultAgentNamespace + "/shim-a serves no /node-settings"},
	} {
		if _, err := e.Gather(t.Context(), "shop", tc.pod); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Gather %s: %v, want %q", tc.pod, err, tc.want)
		}
	}
	// The fake ignores field selectors: an empty namespace has no agent.
	e.AgentNamespace = "none"
	if _, err := e.Gather(t.Context(), "shop", "lonely"); err == nil || !strings.Contains(err.Error(), `no agent pod on node "node-c": no pod in namespace "none"`) {
		t.Errorf("Gather lonely: %v", err)
	}
}

// TestReportJSON: render's fields sit between agent and node, as an
// embedded struct's would; no render object adds none.
func TestReportJSON(t *testing.T) {
	r := Report{Pod: "shop/web", NodeName: "node-a", Agent: "ns/shim-a", Render: struct {
		Searches []string `json:"searches"`
	}{[]string{"a<b"}}}
	b, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); !strings.HasPrefix(got, `{"pod":"shop/web","nodeName":"node-a","agent":"ns/shim-a","searches":["a\u003cb"],"node":{`) {
		t.Errorf("report %s", got)
	}
	r.Render = nil
	if b, err = r.MarshalJSON(); err != nil || !strings.HasPrefix(string(b), `{"pod":"shop/web","nodeName":"node-a","agent":"ns/shim-a","node":{`) {
		t.Errorf("report without render: %s, %v", b, err)
	}
}

// TestWriteComputeError: warnings, then the error, then the trace, all
// on stderr and escaped; nothing on stdout.
func TestWriteComputeError(t *testing.T) {
	var stdout, stderr strings.Builder
	f := Facts{Pod: &corev1.Pod{}}
	err := Write(&stdout, &stderr, FormatText, f, func(warn io.Writer, _ Facts) (Computed, error) {
		io.WriteString(warn, "Warning: x\x1b\n")
		return Computed{Trace: "# explain\n"}, errors.New("fails")
	})
	if want := "Warning: x\\x1b\nexplain: fails\n# explain\n"; err == nil || stdout.Len() != 0 || stderr.String() != want {
		t.Errorf("err %v, stdout %q, stderr %q; want stderr %q", err, stdout.String(), stderr.String(), want)
	}
}
