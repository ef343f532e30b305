package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/internal/cmdline"
	"github.com/dnsconfigurer/dnsconfigurer/internal/kubeclient"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/explain"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// explainAdapters are the port-forward and exec adapters through the API
// server; tests replace them.
var explainAdapters = func(rc *rest.Config, client kubernetes.Interface) (explain.SettingsFetcher, explain.ResolvReader) {
	return explain.PortForwarder{Config: rc, Client: client}, explain.PodExec{Config: rc, Client: client}
}

func runExplain(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("explain", stderr, "usage: dnsconfigurer explain POD [-n NAMESPACE] [--kubeconfig PATH] [--context NAME] [--cluster NAME] [--user NAME] [-o text|json|yaml] [--agent-namespace NS] [--timeout 30s] [--no-exec] [--service NAME] [--service-import NAME]\n\n"+
		"Reads the pod, the node settings its node's agent publishes at "+nodesettings.Path+" (port-forward to the agent's\n"+
		"metrics port), computes the pod's resolv.conf with its trace, and compares each running container's\n"+
		"/etc/resolv.conf (exec cat). For each headless Service of the pod's namespace (or --service), it says\n"+
		"which endpoints the pod gets by the Service's trafficDistribution, its node and that node's topology zone.\n"+
		"Needs: get pods, list pods in the agent namespace, create pods/portforward there, create pods/exec (unless\n"+
		"--no-exec), get namespaces (with the agent's namespaceLabels); for the topology part (reported, not fatal\n"+
		"when refused): get nodes, list services, list endpointslices, and get serviceimports for --service-import.\n\nflags:")
	var kube kubeclient.Kubectl
	registerKubectlFlags(fs, &kube)
	out := fs.String("o", "text", "output: text (a resolv.conf with # comments), json or yaml")
	agentNS := fs.String("agent-namespace", explain.DefaultAgentNamespace, "namespace of the shim or nri DaemonSet's pods")
	timeout := fs.Duration("timeout", 30*time.Second, "bound of each API server step (get, list, port-forward, exec)")
	noExec := fs.Bool("no-exec", false, "do not read the containers' /etc/resolv.conf (no pods/exec needed)")
	var services serviceList
	fs.Var(&services, "service", "`NAME` or NAMESPACE/NAME of a Service whose answers to the pod to explain, in place of the headless Services of the pod's namespace; repeatable")
	var imports serviceList
	fs.Var(&imports, "service-import", "`NAME` or NAMESPACE/NAME of a ServiceImport (Multi-Cluster Services) whose clusterset answers to the pod to explain, besides the Services; repeatable")
	pod, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err == nil {
		err = checkOutput(*out, explain.FormatText, explain.FormatJSON, outYAML)
	}
	if err == nil && *timeout <= 0 {
		err = fmt.Errorf("--timeout %s: must be positive", *timeout)
	}
	if err != nil {
		return usageExit(stderr, "explain", err)
	}
	rc, client, ns, err := kube.Client("explain")
	if err != nil {
		return usageExit(stderr, "explain", err)
	}
	e := explain.Explainer{Client: client, AgentNamespace: *agentNS, Timeout: *timeout, Services: services, Imports: imports}
	if len(imports) > 0 {
		if e.MCS, err = mcsclient.NewForConfig(rc); err != nil {
			return usageExit(stderr, "explain", fmt.Errorf("multi-cluster services client: %w", err))
		}
	}
	e.Settings, e.Resolv = explainAdapters(rc, client)
	if *noExec {
		e.Resolv = nil
	}
	facts, err := e.Gather(ctx, ns, pod)
	if err != nil {
		// The error may quote the agent (an HTTP status line).
		fmt.Fprint(stderr, explain.EscapeTerminal(fmt.Sprintf("explain: %v\n", err)))
		return exitFail
	}
	return writeExplain(stdout, stderr, *out, facts)
}

// registerKubectlFlags binds kubectl's flags that choose the API server,
// the credentials and the namespace.
func registerKubectlFlags(fs *flag.FlagSet, k *kubeclient.Kubectl) {
	fs.StringVar(&k.Kubeconfig, "kubeconfig", "", "kubeconfig `PATH` (default: the files of $KUBECONFIG, else ~/.kube/config, else the in-cluster config)")
	fs.StringVar(&k.Context, "context", "", "the kubeconfig context to use (default: its current-context)")
	fs.StringVar(&k.Cluster, "cluster", "", "the kubeconfig cluster to use (default: the context's)")
	fs.StringVar(&k.User, "user", "", "the kubeconfig user to use (default: the context's)")
	fs.StringVar(&k.Namespace, "n", "", "the pod's namespace (default: the context's, else default)")
	fs.StringVar(&k.Namespace, "namespace", "", "the pod's namespace (same as -n)")
}

// serviceList is a repeatable --service.
type serviceList []string

func (l *serviceList) String() string { return strings.Join(*l, ",") }

func (l *serviceList) Set(v string) error {
	ns, name, ok := strings.Cut(v, "/")
	if !ok {
		name = ns
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("%q: want NAME or NAMESPACE/NAME", v)
	}
	*l = append(*l, v)
	return nil
}

// parseInterspersed parses fs with the one POD argument anywhere among
// the flags, as kubectl takes it.
func parseInterspersed(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := cmdline.ParseInterspersed(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", fmt.Errorf("want one POD argument, got %d", len(pos))
	}
	return pos[0], nil
}

// explainCompute is the agent's policy over the facts, printed as
// render prints it.
func explainCompute(warn io.Writer, f explain.Facts) (explain.Computed, error) {
	eng, err := nodeEngine(f.Settings.NodeDNS(), f.Settings.PodPolicy, f.Settings.NodeIPs, slog.New(slog.DiscardHandler))
	if err != nil {
		return explain.Computed{}, fmt.Errorf("the settings of agent %s: %w", f.Agent, err)
	}
	in := podspec.Input(f.Pod)
	in.NamespacePolicy = f.NamespacePolicy
	res, trace, err := eng.ComputeExplained(in, f.Settings.Host.Policy())
	warnings := printWarnings(warn, eng, res)
	if err != nil {
		return explain.Computed{Trace: trace.Comments()}, fmt.Errorf("the %s agent fails the sandbox of pod %q: %w",
			f.Settings.Kind, f.Pod.Namespace+"/"+f.Pod.Name, err)
	}
	return explain.Computed{ResolvConf: resolvconf.Format(res.Config()), Trace: trace.Comments(), Render: newRenderJSON(res, warnings, trace)}, nil
}

// writeExplain prints the facts as -o asks; it is explain's pure part.
// yaml is the json report converted, its control characters escaped as
// the json's are.
func writeExplain(stdout, stderr io.Writer, out string, f explain.Facts) int {
	if out != outYAML {
		if explain.Write(stdout, stderr, out, f, explainCompute) != nil {
			return exitFail
		}
		return exitOK
	}
	var j bytes.Buffer
	if explain.Write(&j, stderr, explain.FormatJSON, f, explainCompute) != nil {
		return exitFail
	}
	y, err := yaml.JSONToYAML(j.Bytes())
	if err != nil {
		fmt.Fprintf(stderr, "explain: encode yaml: %v\n", err)
		return exitFail
	}
	stdout.Write(y)
	return exitOK
}
