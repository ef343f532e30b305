package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
)

// The agents' pods: explain looks for one on the pod's node.
const (
	defaultAgentNamespace = "dnsconfigurer-node"
	agentSelector         = "app.kubernetes.io/component in (shim,nri)"
	agentPortName         = "metrics"
)

// settingsFetcher reads an agent's /node-settings from its port.
type settingsFetcher interface {
	NodeSettings(ctx context.Context, agent *corev1.Pod, port int32) (nodesettings.Settings, error)
}

// resolvReader reads /etc/resolv.conf in a running container.
type resolvReader interface {
	ResolvConf(ctx context.Context, pod *corev1.Pod, container string) ([]byte, error)
}

// errAgentTooOld is a 404 on /node-settings: an agent built before it.
var errAgentTooOld = errors.New("explain: the agent has no " + nodesettings.Path)

// explainAdapters are the port-forward and exec adapters through the API
// server; tests replace them.
var explainAdapters = func(rc *rest.Config, client kubernetes.Interface) (settingsFetcher, resolvReader) {
	return portForwarder{rc: rc, client: client}, podExec{rc: rc, client: client}
}

// explainer gathers a live pod's facts from the API server and its node's
// agent; exec nil skips the containers (--no-exec).
type explainer struct {
	client  kubernetes.Interface
	fetch   settingsFetcher
	exec    resolvReader
	agentNS string
	timeout time.Duration
}

// explainFacts are what explain prints from: the pod, the agent, its
// settings, the namespace label and the containers' files.
type explainFacts struct {
	pod        *corev1.Pod
	agent      string
	settings   nodesettings.Settings
	nsPolicy   string
	containers []containerFile
}

// containerFile is a container's /etc/resolv.conf, or why it could not be
// read (err).
type containerFile struct {
	name string
	data []byte
	err  error
}

func runExplain(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var kube kubectlFlags
	kube.register(fs)
	out := fs.String("o", "text", "output: text (a resolv.conf with # comments) or json")
	agentNS := fs.String("agent-namespace", defaultAgentNamespace, "namespace of the shim or nri DaemonSet's pods")
	timeout := fs.Duration("timeout", 30*time.Second, "bound of each API server step (get, list, port-forward, exec)")
	noExec := fs.Bool("no-exec", false, "do not read the containers' /etc/resolv.conf (no pods/exec needed)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dnsconfigurer explain POD [-n NAMESPACE] [--kubeconfig PATH] [--context NAME] [--cluster NAME] [--user NAME] [-o text|json] [--agent-namespace NS] [--timeout 30s] [--no-exec]\n\n"+
			"Reads the pod, the node settings its node's agent publishes at "+nodesettings.Path+" (port-forward to the agent's\n"+
			"metrics port), computes the pod's resolv.conf with its trace, and compares each running container's\n"+
			"/etc/resolv.conf (exec cat). Needs: get pods, list pods in the agent namespace, create pods/portforward\n"+
			"there, create pods/exec (unless --no-exec), get namespaces (with the agent's namespaceLabels).\n\nflags:")
		fs.PrintDefaults()
	}
	pod, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err == nil {
		err = checkOutput(*out, "text", outJSON)
	}
	if err == nil && *timeout <= 0 {
		err = fmt.Errorf("--timeout %s: must be positive", *timeout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "explain: %v\n", err)
		return exitUsage
	}
	rc, client, ns, err := kube.client("explain")
	if err != nil {
		fmt.Fprintf(stderr, "explain: %v\n", err)
		return exitUsage
	}
	e := explainer{client: client, agentNS: *agentNS, timeout: *timeout}
	e.fetch, e.exec = explainAdapters(rc, client)
	if *noExec {
		e.exec = nil
	}
	facts, err := e.gather(ctx, ns, pod)
	if err != nil {
		// The error may quote the agent (an HTTP status line).
		fmt.Fprint(stderr, escapeTerminal(fmt.Sprintf("explain: %v\n", err)))
		return exitFail
	}
	return writeExplain(stdout, stderr, *out, facts)
}

// parseInterspersed parses fs with the one POD argument anywhere among
// the flags, as kubectl takes it.
func parseInterspersed(fs *flag.FlagSet, args []string) (string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) != 1 {
		return "", fmt.Errorf("want one POD argument, got %d", len(pos))
	}
	return pos[0], nil
}

// step bounds one network step by e.timeout.
func (e *explainer) step(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.timeout)
}

// gather reads the pod, finds its node's agent, gets its settings, the
// namespace label when the agent reads labels, and the containers' files.
func (e *explainer) gather(ctx context.Context, ns, name string) (explainFacts, error) {
	sctx, cancel := e.step(ctx)
	pod, err := e.client.CoreV1().Pods(ns).Get(sctx, name, metav1.GetOptions{})
	cancel()
	switch {
	case apierrors.IsNotFound(err):
		return explainFacts{}, fmt.Errorf("pod %q not found in namespace %q", name, ns)
	case err != nil:
		return explainFacts{}, fmt.Errorf("get pod %s/%s: %w", ns, name, rbacHint(err, "get pods"))
	case pod.Spec.NodeName == "":
		return explainFacts{}, fmt.Errorf("pod %s/%s is not scheduled to a node yet (spec.nodeName is empty): no node settings apply", ns, name)
	}
	agent, port, err := e.findAgent(ctx, pod.Spec.NodeName)
	if err != nil {
		return explainFacts{}, err
	}
	f := explainFacts{pod: pod, agent: agent.Namespace + "/" + agent.Name}
	sctx, cancel = e.step(ctx)
	f.settings, err = e.fetch.NodeSettings(sctx, agent, port)
	cancel()
	switch {
	case errors.Is(err, errAgentTooOld):
		return explainFacts{}, fmt.Errorf("agent pod %s serves no %s: it is older than this explain; upgrade the DaemonSet", f.agent, nodesettings.Path)
	case err != nil:
		return explainFacts{}, fmt.Errorf("node settings of agent pod %s (port %d): %w", f.agent, port, err)
	}
	if f.settings.PodPolicy.NamespaceLabels {
		sctx, cancel = e.step(ctx)
		n, err := e.client.CoreV1().Namespaces().Get(sctx, ns, metav1.GetOptions{})
		cancel()
		if err != nil {
			return explainFacts{}, fmt.Errorf("the agent reads namespace labels: namespace %q: %w", ns, rbacHint(err, "get namespaces"))
		}
		f.nsPolicy = n.Labels[v1alpha1.LabelDNSPolicy]
	}
	if e.exec != nil {
		f.containers = e.readContainers(ctx, pod)
	}
	return f, nil
}

// findAgent is the agent pod on node (a running one first) and its
// metrics port.
func (e *explainer) findAgent(ctx context.Context, node string) (*corev1.Pod, int32, error) {
	field := "spec.nodeName=" + node
	sctx, cancel := e.step(ctx)
	list, err := e.client.CoreV1().Pods(e.agentNS).List(sctx, metav1.ListOptions{LabelSelector: agentSelector, FieldSelector: field})
	cancel()
	if err != nil {
		return nil, 0, fmt.Errorf("list agent pods in namespace %q: %w", e.agentNS, rbacHint(err, "list pods"))
	}
	if len(list.Items) == 0 {
		return nil, 0, fmt.Errorf("no agent pod on node %q: no pod in namespace %q matches labelSelector %q and fieldSelector %q (is the shim or nri DaemonSet running there? --agent-namespace)",
			node, e.agentNS, agentSelector, field)
	}
	pods := list.Items
	sort.SliceStable(pods, func(i, j int) bool {
		return pods[i].Status.Phase == corev1.PodRunning && pods[j].Status.Phase != corev1.PodRunning
	})
	agent := &pods[0]
	for _, c := range agent.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == agentPortName {
				return agent, p.ContainerPort, nil
			}
		}
	}
	return nil, 0, fmt.Errorf("agent pod %s/%s has no container port named %q (its --metrics-listen port)", agent.Namespace, agent.Name, agentPortName)
}

// readContainers reads each container's /etc/resolv.conf; one not running
// or without cat is unreadable, with the reason.
func (e *explainer) readContainers(ctx context.Context, pod *corev1.Pod) []containerFile {
	state := map[string]corev1.ContainerState{}
	for _, s := range pod.Status.ContainerStatuses {
		state[s.Name] = s.State
	}
	var out []containerFile
	for _, c := range pod.Spec.Containers {
		f := containerFile{name: c.Name}
		st, ok := state[c.Name]
		switch {
		case !ok:
			f.err = errors.New("not running (no status yet)")
		case st.Waiting != nil:
			f.err = fmt.Errorf("not running (waiting: %s)", st.Waiting.Reason)
		case st.Terminated != nil:
			f.err = fmt.Errorf("not running (terminated: %s)", st.Terminated.Reason)
		default:
			sctx, cancel := e.step(ctx)
			f.data, f.err = e.exec.ResolvConf(sctx, pod, c.Name)
			cancel()
			if f.err != nil {
				f.err = rbacHint(f.err, "create pods/exec")
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
