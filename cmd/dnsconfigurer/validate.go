package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/version"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/lint"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

type validateJSON struct {
	Allowed  bool                `json:"allowed"`
	Errors   []policy.FieldError `json:"errors"`
	Warnings []string            `json:"warnings"`
	Trace    policy.Trace        `json:"trace,omitempty"` // --explain only
}

// validateUsage is validate's help text before its flags.
const validateUsage = `usage: dnsconfigurer validate -f FILE|DIR|- [-f ...] [-R] [--strict] [--pod-template KIND[.GROUP]=PATH ...] [--cluster-dns IP[,IP...]] [--cluster-domain DOMAIN] [--resolv-conf PATH] [--node-os linux|windows] [-o text|json|yaml|sarif] [--explain]

Checks the pod templates of manifests as the API server does (--strict: and
as the node would), and reports every warning render prints: the API
server's and kubelet's, such as dnsPolicy ClusterFirst on a hostNetwork pod
(kubelet gives it the node's resolver config). Warnings do not fail the run.
Without --resolv-conf the node's resolver file is taken as empty; --strict
reads it.

An object the API server refuses whole is a finding at its line: no kind, a
field of the wrong type, over 3 MiB. A dnsConfig option value must be a
string: the API server refuses value: 2 (what helm --set makes; quote it, or
use --set-string) and validate reports spec...dnsConfig.options[N].value.

Pod templates are read from Kubernetes' workload kinds and from: Argo
Workflow, WorkflowTemplate, ClusterWorkflowTemplate (spec) and CronWorkflow
(spec.workflowSpec); Tekton TaskRun (spec.podTemplate) and PipelineRun
(spec.taskRunTemplate.podTemplate, spec.taskRunSpecs[*].podTemplate and the
v1beta1 paths); Knative Service and Configuration (spec.template) and
Revision (spec). Other kinds are skipped and named. --pod-template names a
kind's template: PATH is a dot path to a pod template (with a spec) or a
pod spec, [] or [*] for each item of a list; it replaces the known paths of
that kind.

Exit status: 0 no error finding, 1 an error finding, 2 input that cannot be
read (no such file, not YAML or JSON, no objects at all) or a bad flag. With
-o sarif, input that cannot be read still gives a SARIF 2.1.0 log, with the
error as its invocation's notification.`

func runValidate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate", stderr, validateUsage)
	var f commandFlags
	f.register(fs, "text", "output: text, json, yaml or sarif (SARIF 2.1.0, for code review)",
		"also print every decision the node would take for the pod, as render --explain does (a single Pod only)")
	strict := fs.Bool("strict", false, "also reject what the node would fail or trim later")
	var paths templatePaths
	fs.Var(&paths, "pod-template", "KIND[.GROUP]=PATH: where objects of a kind keep a pod template or pod spec, such as Workflow.argoproj.io=spec; repeatable")
	if code, ok := f.parse(fs, args, "text", outJSON, outYAML, outSARIF); !ok {
		return code
	}
	finder := lint.NewFinder(paths)
	f.input.keep = finder.Reads
	var msg bytes.Buffer
	fs.SetOutput(io.MultiWriter(stderr, &msg))
	m, code, ok := f.read(ctx, fs, stdin)
	fs.SetOutput(stderr)
	if !ok {
		if f.out == outSARIF {
			lint.WriteSARIFError(stdout, version.Get().Version, strings.TrimSpace(msg.String()), f.input.single())
		}
		return code
	}
	node := kubeletNode{flags: &f.node, strict: *strict, resolvConf: flagSet(fs, "resolv-conf"), explain: f.explain}
	if f.whole(m) {
		return lintManifests(ctx, m, finder, node, f.out, stdout, stderr)
	}
	return validatePod(m.pod, node, f.explain, f.out, stdout, stderr)
}

// kubeletNode is the node validate checks against.
type kubeletNode struct {
	flags  *nodeFlags
	strict bool
	// resolvConf: --resolv-conf was given, so its file is read.
	resolvConf bool
	// explain: the trace reads the file, usable or not, as render's.
	explain bool
}

// engine is the node's engine and resolver config. Without --strict and
// --resolv-conf the resolver file is taken as empty: kubelet's warnings
// then come from the pod alone, not from the machine validate runs on.
func (n kubeletNode) engine() (*policy.Engine, policy.Host, error) {
	if n.strict || n.resolvConf || n.explain {
		return validateNode(n.flags, !n.explain || n.strict)
	}
	eng, err := n.flags.engine()
	return eng, policy.Host{}, err
}

// validatePod validates a single Pod as validate always has.
func validatePod(pod *corev1.Pod, node kubeletNode, explain bool, out string, stdout, stderr io.Writer) int {
	in := podspec.Input(pod)
	in.NamespacePolicy = node.flags.namespacePolicy
	eng, host, err := node.engine()
	if err != nil {
		return usageExit(stderr, "validate", err)
	}
	var trace policy.Trace
	if explain {
		_, trace, _ = eng.ComputeExplained(in, host) // a failure is the trace's last decision
	}
	var v policy.Validation
	if node.strict {
		v = eng.ValidateNode(in, host)
		v.Errors = append(v.Errors, v.Trims...)
	} else {
		v = policy.ValidateAPI(in)
	}
	for _, f := range lint.WithKubelet(func(policy.Input) []lint.Finding { return nil }, eng, host, node.strict)(in) {
		v.Warnings = append(v.Warnings, f.Message)
	}
	if err := printValidation(stdout, stderr, out, v, trace); err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return exitFail
	}
	if len(v.Errors) > 0 {
		return exitFail
	}
	return exitOK
}

// validateNode is the engine of the node flags and their host config;
// with strict the host config must be usable (it is the node's).
func validateNode(node *nodeFlags, strict bool) (*policy.Engine, policy.Host, error) {
	eng, err := node.engine()
	if err != nil {
		return nil, policy.Host{}, err
	}
	host := node.host()
	if strict && host.Err != nil {
		return nil, policy.Host{}, fmt.Errorf("--resolv-conf: %w", host.Err)
	}
	return eng, host, nil
}

// lintManifests validates every pod template of m: one result per
// template, findings on stdout, the summary on stderr (-o text).
func lintManifests(ctx context.Context, m manifests, finder lint.Finder, node kubeletNode, out string, stdout, stderr io.Writer) int {
	targets, skipped := finder.Find(m.objs)
	eng, host, err := node.engine()
	if err != nil {
		return usageExit(stderr, "validate", err)
	}
	check := lint.APICheck
	if node.strict {
		check = lint.NodeCheck(eng, host)
	}
	check = lint.WithKubelet(check, eng, host, node.strict)
	for i := range targets {
		targets[i].Input.NamespacePolicy = node.flags.namespacePolicy
	}
	rep, err := lint.Run(ctx, targets, check)
	if err != nil {
		fmt.Fprintf(stderr, "validate: stopped: %v\n", err)
		return exitFail
	}
	rep.Summary.Files, rep.Summary.Objects, rep.Summary.SkippedKinds = m.files, len(m.objs), skipped
	for _, k := range skipped {
		rep.Summary.Skipped += k.Objects
	}
	if err := writeReport(stdout, stderr, out, rep); err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return exitFail
	}
	if rep.Summary.Failed > 0 {
		return exitFail
	}
	return exitOK
}

// writeReport prints a lint report as -o asks.
func writeReport(stdout, stderr io.Writer, out string, rep lint.Report) error {
	switch out {
	case outSARIF:
		return rep.WriteSARIF(stdout, version.Get().Version)
	case outJSON:
		return rep.WriteJSON(stdout)
	case outYAML:
		return writeOutput(stdout, out, rep)
	}
	if err := rep.WriteText(stdout); err != nil {
		return err
	}
	_, err := fmt.Fprintln(stderr, rep.Summary)
	return err
}

// printValidation prints v as -o asks: text (errors on stdout, warnings
// on stderr, then the trace on stdout), json or yaml.
func printValidation(stdout, stderr io.Writer, out string, v policy.Validation, trace policy.Trace) error {
	if out == "text" {
		for _, w := range v.Warnings {
			fmt.Fprintf(stderr, "Warning: %s\n", w)
		}
		for _, e := range v.Errors {
			fmt.Fprintf(stdout, "%s: %s\n", e.Field, e.Message)
		}
		io.WriteString(stdout, trace.Comments())
		return nil
	}
	return writeOutput(stdout, out, validateJSON{Allowed: len(v.Errors) == 0, Errors: nonNil(v.Errors), Warnings: nonNil(v.Warnings), Trace: trace})
}

// templatePaths is a repeatable --pod-template.
type templatePaths []lint.TemplatePath

func (p *templatePaths) String() string {
	var parts []string
	for _, t := range *p {
		parts = append(parts, t.String())
	}
	return strings.Join(parts, ",")
}

func (p *templatePaths) Set(v string) error {
	t, err := lint.ParseTemplatePath(v)
	if err != nil {
		return err
	}
	*p = append(*p, t)
	return nil
}

// flagSet reports whether the flag name was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
