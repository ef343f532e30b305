package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// renderJSON is the -o json and -o yaml contract of render.
type renderJSON struct {
	Nameservers []string       `json:"nameservers"`
	Searches    []string       `json:"searches"`
	Options     []string       `json:"options"`
	Hostname    string         `json:"hostname"`
	FQDN        string         `json:"fqdn"`
	Warnings    []warningJSON  `json:"warnings"`
	Trace       []decisionJSON `json:"trace,omitempty"` // --explain only
}

type warningJSON struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// decisionJSON is one entry of the --explain trace of render and validate.
type decisionJSON struct {
	Step    string   `json:"step"`
	Rule    string   `json:"rule"`
	Detail  string   `json:"detail"`
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
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
		writeTrace(stderr, trace)
		return exitFail
	}
	return printRender(stdout, stderr, out, res, warnings, trace)
}

// printRender prints the result as -o asks, and the trace when there is one.
func printRender(stdout, stderr io.Writer, out string, res policy.Result, warnings []policy.Warning, trace policy.Trace) int {
	if out == "resolv.conf" {
		io.WriteString(stdout, resolvconf.Format(res.Config()))
		writeTrace(stdout, trace)
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
	j := renderJSON{Nameservers: res.Nameservers, Searches: res.Searches, Options: res.Options,
		Hostname: res.Hostname, FQDN: res.FQDN, Warnings: []warningJSON{}, Trace: traceJSON(trace)}
	for _, w := range warnings {
		j.Warnings = append(j.Warnings, warningJSON{Reason: w.Reason, Message: w.Message})
	}
	return j
}

// writeTrace prints a trace for a reader, as resolv.conf comments so that
// render's output stays a resolv.conf: each decision numbered, with its
// step, rule and detail, then the entries it added (+) and removed (-).
func writeTrace(w io.Writer, trace policy.Trace) {
	if len(trace) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("# explain\n")
	for i, d := range trace {
		fmt.Fprintf(&b, "# %d. %s (%s): %s\n", i+1, d.Step, d.Rule, d.Detail)
		if len(d.Added) > 0 {
			fmt.Fprintf(&b, "#      + %s\n", strings.Join(d.Added, " "))
		}
		if len(d.Removed) > 0 {
			fmt.Fprintf(&b, "#      - %s\n", strings.Join(d.Removed, " "))
		}
	}
	io.WriteString(w, b.String())
}

// traceJSON is the -o json|yaml form of a trace: nil without one, lists
// never null.
func traceJSON(trace policy.Trace) []decisionJSON {
	var out []decisionJSON
	for _, d := range trace {
		out = append(out, decisionJSON{Step: d.Step, Rule: d.Rule, Detail: d.Detail, Added: nonNil(d.Added), Removed: nonNil(d.Removed)})
	}
	return out
}
