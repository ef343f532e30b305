package explain

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
)

// The agents' pods: explain looks for one on the pod's node.
const (
	DefaultAgentNamespace = "dnsconfigurer-node"
	agentSelector         = "app.kubernetes.io/component in (shim,nri)"
	// AgentPortName is the agent container's port serving /node-settings.
	AgentPortName = "metrics"
)

// SettingsFetcher reads an agent's /node-settings from its port.
type SettingsFetcher interface {
	NodeSettings(ctx context.Context, agent *corev1.Pod, port int32) (nodesettings.Settings, error)
}

// ResolvReader reads /etc/resolv.conf in a running container.
type ResolvReader interface {
	ResolvConf(ctx context.Context, pod *corev1.Pod, container string) ([]byte, error)
}

// ErrAgentTooOld is a 404 on /node-settings: an agent built before it.
var ErrAgentTooOld = errors.New("explain: the agent has no " + nodesettings.Path)

// An Explainer gathers a live pod's facts from the API server and its
// node's agent.
type Explainer struct {
	Client   kubernetes.Interface
	Settings SettingsFetcher
	// Resolv nil skips the containers (--no-exec).
	Resolv ResolvReader
	// AgentNamespace holds the shim's or NRI plugin's pods.
	AgentNamespace string
	// Timeout bounds each API server step.
	Timeout time.Duration
	// Services (NAME or NAMESPACE/NAME) are the Services whose answers
	// the topology part explains; none is the headless ones of the pod's
	// namespace.
	Services []string
	// Imports (NAME or NAMESPACE/NAME) are ServiceImports of the
	// Multi-Cluster Services API whose clusterset answers the topology
	// part explains too, read with MCS.
	Imports []string
	MCS     mcsclient.Interface
}

// Facts are what explain prints from: the pod, the agent, its settings,
// the namespace label and the containers' files.
type Facts struct {
	Pod             *corev1.Pod
	Agent           string // namespace/name
	Settings        nodesettings.Settings
	NamespacePolicy string // the namespace's dns-policy label
	Containers      []File
	// Topology is the pod's node and the headless Services' endpoints;
	// nil prints no topology part.
	Topology *Topology
}

// File is a container's /etc/resolv.conf, or why it could not be read
// (Err).
type File struct {
	Name string
	Data []byte
	Err  error
}

// step bounds one network step by e.Timeout.
func (e *Explainer) step(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.Timeout)
}

// Gather reads the pod, finds its node's agent, gets its settings, the
// namespace label when the agent reads labels, the topology of its
// headless names and the containers' files.
func (e *Explainer) Gather(ctx context.Context, ns, name string) (Facts, error) {
	sctx, cancel := e.step(ctx)
	pod, err := e.Client.CoreV1().Pods(ns).Get(sctx, name, metav1.GetOptions{})
	cancel()
	switch {
	case apierrors.IsNotFound(err):
		return Facts{}, fmt.Errorf("pod %q not found in namespace %q", name, ns)
	case err != nil:
		return Facts{}, fmt.Errorf("get pod %s/%s: %w", ns, name, rbacHint(err, "get pods"))
	case pod.Spec.NodeName == "":
		return Facts{}, fmt.Errorf("pod %s/%s is not scheduled to a node yet (spec.nodeName is empty): no node settings apply", ns, name)
	}
	agent, port, err := e.findAgent(ctx, pod.Spec.NodeName)
	if err != nil {
		return Facts{}, err
	}
	f := Facts{Pod: pod, Agent: agent.Namespace + "/" + agent.Name}
	sctx, cancel = e.step(ctx)
	f.Settings, err = e.Settings.NodeSettings(sctx, agent, port)
	cancel()
	switch {
	case errors.Is(err, ErrAgentTooOld):
		return Facts{}, fmt.Errorf("agent pod %s serves no %s: it is older than this explain; upgrade the DaemonSet", f.Agent, nodesettings.Path)
	case err != nil:
		return Facts{}, fmt.Errorf("node settings of agent pod %s (port %d): %w", f.Agent, port, err)
	}
	if f.Settings.PodPolicy.NamespaceLabels {
		sctx, cancel = e.step(ctx)
		n, err := e.Client.CoreV1().Namespaces().Get(sctx, ns, metav1.GetOptions{})
		cancel()
		if err != nil {
			return Facts{}, fmt.Errorf("the agent reads namespace labels: namespace %q: %w", ns, rbacHint(err, "get namespaces"))
		}
		f.NamespacePolicy = n.Labels[v1alpha1.LabelDNSPolicy]
	}
	f.Topology = e.gatherTopology(ctx, pod, e.Services)
	if e.Resolv != nil {
		f.Containers = e.readContainers(ctx, pod)
	}
	return f, nil
}

// findAgent is the agent pod on node (a running one first) and its
// metrics port.
func (e *Explainer) findAgent(ctx context.Context, node string) (*corev1.Pod, int32, error) {
	field := "spec.nodeName=" + node
	sctx, cancel := e.step(ctx)
	list, err := e.Client.CoreV1().Pods(e.AgentNamespace).List(sctx, metav1.ListOptions{LabelSelector: agentSelector, FieldSelector: field})
	cancel()
	if err != nil {
		return nil, 0, fmt.Errorf("list agent pods in namespace %q: %w", e.AgentNamespace, rbacHint(err, "list pods"))
	}
	if len(list.Items) == 0 {
		return nil, 0, fmt.Errorf("no agent pod on node %q: no pod in namespace %q matches labelSelector %q and fieldSelector %q (is the shim or nri DaemonSet running there? --agent-namespace)",
			node, e.AgentNamespace, agentSelector, field)
	}
	pods := list.Items
	sort.SliceStable(pods, func(i, j int) bool {
		return pods[i].Status.Phase == corev1.PodRunning && pods[j].Status.Phase != corev1.PodRunning
	})
	agent := &pods[0]
	for _, c := range agent.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == AgentPortName {
				return agent, p.ContainerPort, nil
			}
		}
	}
	return nil, 0, fmt.Errorf("agent pod %s/%s has no container port named %q (its --metrics-listen port)", agent.Namespace, agent.Name, AgentPortName)
}

// readContainers reads each container's /etc/resolv.conf; one not running
// or without cat is unreadable, with the reason.
func (e *Explainer) readContainers(ctx context.Context, pod *corev1.Pod) []File {
	state := map[string]corev1.ContainerState{}
	for _, s := range pod.Status.ContainerStatuses {
		state[s.Name] = s.State
	}
	var out []File
	for _, c := range pod.Spec.Containers {
		f := File{Name: c.Name}
		st, ok := state[c.Name]
		switch {
		case !ok:
			f.Err = errors.New("not running (no status yet)")
		case st.Waiting != nil:
			f.Err = fmt.Errorf("not running (waiting: %s)", st.Waiting.Reason)
		case st.Terminated != nil:
			f.Err = fmt.Errorf("not running (terminated: %s)", st.Terminated.Reason)
		default:
			sctx, cancel := e.step(ctx)
			f.Data, f.Err = e.Resolv.ResolvConf(sctx, pod, c.Name)
			cancel()
			if f.Err != nil {
				f.Err = rbacHint(f.Err, "create pods/exec")
			}
		}
		out = append(out, f)
	}
	return out
}

// rbacHint adds the verb a refused request needed.
func rbacHint(err error, verb string) error {
	if apierrors.IsForbidden(err) || strings.Contains(err.Error(), "forbidden") {
		return fmt.Errorf("%w (RBAC: explain needs %s)", err, verb)
	}
	return err
}
