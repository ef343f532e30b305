package main

import (
	"context"
	"fmt"
	"io"

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
	Trace    []decisionJSON      `json:"trace,omitempty"` // --explain only
}

func runValidate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate", stderr, "usage: dnsconfigurer validate -f FILE|DIR|- [-f ...] [-R] [--strict] [--cluster-dns IP[,IP...]] [--cluster-domain DOMAIN] [--resolv-conf PATH] [--node-os linux|windows] [-o text|json|yaml|sarif] [--explain]")
	var f commandFlags
	f.register(fs, "text", "output: text, json, yaml or sarif (SARIF 2.1.0, for code review)",
		"also print every decision the node would take for the pod, as render --explain does (a single Pod only)")
	strict := fs.Bool("strict", false, "also reject what the node would fail or trim later")
	if code, ok := f.parse(fs, args, "text", outJSON, outYAML, outSARIF); !ok {
		return code
	}
	m, code, ok := f.read(ctx, fs, stdin)
	if !ok {
		return code
	}
	if f.whole(m) {
		return lintManifests(ctx, m, &f.node, *strict, f.out, stdout, stderr)
	}
	return validatePod(m.pod, &f.node, *strict, f.explain, f.out, stdout, stderr)
}

// validatePod validates a single Pod as validate always has.
func validatePod(pod *corev1.Pod, node *nodeFlags, strict, explain bool, out string, stdout, stderr io.Writer) int {
	in := podspec.Input(pod)
	in.NamespacePolicy = node.namespacePolicy
	var v policy.Validation
	var trace policy.Trace
	if strict || explain {
		eng, host, err := validateNode(node, strict)
		if err != nil {
			return usageExit(stderr, "validate", err)
		}
		if explain {
			_, trace, _ = eng.ComputeExplained(in, host) // a failure is the trace's last decision
		}
		if strict {
			v = eng.ValidateNode(in, host)
			v.Errors = append(v.Errors, v.Trims...)
		}
	}
	if !strict {
		v = policy.ValidateAPI(in)
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
func lintManifests(ctx context.Context, m manifests, node *nodeFlags, strict bool, out string, stdout, stderr io.Writer) int {
	targets, skipped, err := lint.Targets(m.objs)
	if err != nil {
		return usageExit(stderr, "validate", err)
	}
	check := lint.APICheck
	if strict {
		eng, host, err := validateNode(node, true)
		if err != nil {
			return usageExit(stderr, "validate", err)
		}
		check = lint.NodeCheck(eng, host)
	}
	for i := range targets {
		targets[i].Input.NamespacePolicy = node.namespacePolicy
	}
	rep, err := lint.Run(ctx, targets, check)
	if err != nil {
		fmt.Fprintf(stderr, "validate: stopped: %v\n", err)
		return exitFail
	}
	rep.Summary.Files, rep.Summary.Objects, rep.Summary.Skipped = m.files, len(m.objs), skipped
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
		writeTrace(stdout, trace)
		return nil
	}
	return writeOutput(stdout, out, validateJSON{Allowed: len(v.Errors) == 0, Errors: nonNil(v.Errors), Warnings: nonNil(v.Warnings), Trace: traceJSON(trace)})
}
