package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

func init() {
	register("validate", command{summary: "check a pod as the API server would (--strict: and as the node would)", run: runValidate})
}

type validateJSON struct {
	Allowed  bool                `json:"allowed"`
	Errors   []policy.FieldError `json:"errors"`
	Warnings []string            `json:"warnings"`
	Trace    []decisionJSON      `json:"trace,omitempty"` // --explain only
}

func runValidate(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var node nodeFlags
	node.register(fs)
	file := fs.String("f", "", "pod manifest (YAML or JSON), - for stdin")
	strict := fs.Bool("strict", false, "also reject what the node would fail or trim later")
	out := fs.String("o", "text", "output: text, json or yaml")
	explain := fs.Bool("explain", false, "also print every decision the node would take for the pod, as render --explain does")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dnsconfigurer validate -f POD.yaml [--strict] [--cluster-dns IP[,IP...]] [--cluster-domain DOMAIN] [--resolv-conf PATH] [--node-os linux|windows] [-o text|json|yaml] [--explain]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "validate: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if err := checkOutput(*out, "text", outJSON, outYAML); err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return exitUsage
	}
	pod, err := readPod(*file, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return exitUsage
	}
	in := podspec.Input(pod)
	in.NamespacePolicy = node.namespacePolicy
	var v policy.Validation
	var trace policy.Trace
	if *strict || *explain {
		eng, err := node.engine()
		if err != nil {
			fmt.Fprintf(stderr, "validate: %v\n", err)
			return exitUsage
		}
		host := node.host()
		if *strict && host.Err != nil {
			fmt.Fprintf(stderr, "validate: --resolv-conf: %v\n", host.Err)
			return exitUsage
		}
		if *explain {
			_, trace, _ = eng.ComputeExplained(in, host) // a failure is the trace's last decision
		}
		if *strict {
			v = eng.ValidateNode(in, host)
			v.Errors = append(v.Errors, v.Trims...)
		}
	}
	if !*strict {
		v = policy.ValidateAPI(in)
	}
	if err := printValidation(stdout, stderr, *out, v, trace); err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return exitFail
	}
	if len(v.Errors) > 0 {
		return exitFail
	}
	return exitOK
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
	j := validateJSON{Allowed: len(v.Errors) == 0, Errors: v.Errors, Warnings: v.Warnings, Trace: traceJSON(trace)}
	if j.Errors == nil {
		j.Errors = []policy.FieldError{}
	}
	if j.Warnings == nil {
		j.Warnings = []string{}
	}
	return writeOutput(stdout, out, j)
}
