package main

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// renderJSON is the -o json and -o yaml contract of render.
type renderJSON struct {
	resolvconf.Config
	Hostname string        `json:"hostname"`
	FQDN     string        `json:"fqdn"`
	Warnings []warningJSON `json:"warnings"`
	Trace    policy.Trace  `json:"trace,omitempty"` // --explain only
}

type warningJSON struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func runRender(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("render", stderr, "usage: dnsconfigurer render -f FILE|DIR|- [-f ...] [-R] [--cluster-dns IP[,IP...]] [--cluster-domain DOMAIN] [--resolv-conf PATH] [--node-os linux|windows] [-o resolv.conf|json|yaml] [--explain]")
	var f commandFlags
	f.register(fs, "resolv.conf", "output: resolv.conf, json or yaml",
		"print every decision behind the result after it (# comments; a trace array with -o json|yaml); a single Pod only")
	if code, ok := f.parse(fs, args, "resolv.conf", outJSON, outYAML); !ok {
		return code
	}
	eng, err := f.node.engine()
	if err != nil {
		return usageExit(stderr, "render", err)
	}
	m, code, ok := f.read(ctx, fs, stdin)
	if !ok {
		return code
	}
	if f.whole(m) {
		return renderTemplates(m, &f.node, eng, f.out, stdout, stderr)
	}
	return renderPod(m.pod, &f.node, eng, f.explain, f.out, stdout, stderr)
}

// renderPod renders a single Pod as render always has.
func renderPod(pod *corev1.Pod, node *nodeFlags, eng *policy.Engine, explain bool, out string, stdout, stderr io.Writer) int {
	in := podspec.Input(pod)
	in.NamespacePolicy = node.namespacePolicy
	var res policy.Result
	var trace policy.Trace
	var err error
	if explain {
		res, trace, err = eng.ComputeExplained(in, node.host())
	} else {
		res, err = eng.Compute(in, node.host())
	}
	warnings := printWarnings(stderr, eng, res)
	if err != nil {
		fmt.Fprintf(stderr, "render: kubelet would fail the sandbox of pod %q: %v\n", pod.Namespace+"/"+pod.Name, err)
		io.WriteString(stderr, trace.Comments())
		return exitFail
	}
	return printRender(stdout, stderr, out, res, warnings, trace)
}

// printRender prints the result as -o asks, and the trace when there is one.
func printRender(stdout, stderr io.Writer, out string, res policy.Result, warnings []policy.Warning, trace policy.Trace) int {
	if out == "resolv.conf" {
		io.WriteString(stdout, resolvconf.Format(res.Config()))
		io.WriteString(stdout, trace.Comments())
		return exitOK
	}
	if err := writeOutput(stdout, out, newRenderJSON(res, warnings, trace)); err != nil {
		fmt.Fprintf(stderr, "render: %v\n", err)
		return exitFail
	}
	return exitOK
}

// printWarnings prints the engine's warnings and the result's to stderr,
// and returns them.
func printWarnings(stderr io.Writer, eng *policy.Engine, res policy.Result) []policy.Warning {
	warnings := append(append([]policy.Warning(nil), eng.Warnings()...), res.Warnings...)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "Warning: %s: %s\n", w.Reason, w.Message)
	}
	return warnings
}

// newRenderJSON is the -o json|yaml form of a result.
func newRenderJSON(res policy.Result, warnings []policy.Warning, trace policy.Trace) renderJSON {
	j := renderJSON{Config: resolvconf.Config{Nameservers: res.Nameservers, Searches: res.Searches, Options: res.Options},
		Hostname: res.Hostname, FQDN: res.FQDN, Warnings: []warningJSON{}, Trace: trace}
	for _, w := range warnings {
		j.Warnings = append(j.Warnings, warningJSON{Reason: w.Reason, Message: w.Message})
	}
	return j
}
