package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/lint"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// renderTemplateJSON is render's -o json|yaml entry for one template of a
// multi-object input: where it is, then the result or the error.
type renderTemplateJSON struct {
	lint.Result
	Resolv *renderJSON `json:"resolv,omitempty"`
	Error  string      `json:"error,omitempty"`
}

// renderTemplates renders every pod template of m: one resolv.conf each,
// after a "# LABEL" comment line, or one JSON entry each. A template the
// node would fail is reported and makes the exit status 1.
func renderTemplates(m manifests, node *nodeFlags, eng *policy.Engine, out string, stdout, stderr io.Writer) int {
	targets, skipped, err := lint.Targets(m.objs)
	if err != nil {
		return usageExit(stderr, "render", err)
	}
	host := node.host()
	code := exitOK
	var text strings.Builder
	entries := []renderTemplateJSON{}
	for i, t := range targets {
		t.Input.NamespacePolicy = node.namespacePolicy
		e := renderTemplateJSON{Result: lint.NewResult(t)}
		label := e.Label()
		if e.Template != "" {
			label += " " + e.Template
		}
		res, err := eng.Compute(t.Input, host)
		for _, w := range append(append([]policy.Warning(nil), eng.Warnings()...), res.Warnings...) {
			fmt.Fprintf(stderr, "Warning: %s: %s: %s\n", label, w.Reason, w.Message)
		}
		if err != nil {
			fmt.Fprintf(stderr, "render: %s: kubelet would fail the pod sandbox: %v\n", label, err)
			e.Allowed, e.Error, code = false, err.Error(), exitFail
			entries = append(entries, e)
			continue
		}
		j := newRenderJSON(res, append(append([]policy.Warning(nil), eng.Warnings()...), res.Warnings...), nil)
		e.Resolv = &j
		entries = append(entries, e)
		if i > 0 {
			text.WriteString("\n")
		}
		fmt.Fprintf(&text, "# %s\n%s", label, resolvconf.Format(res.Config()))
	}
	fmt.Fprintf(stderr, "render: %d pod templates in %d objects (%d files; %d objects of other kinds skipped)\n",
		len(targets), len(m.objs), m.files, skipped)
	if out == "resolv.conf" {
		io.WriteString(stdout, text.String())
		return code
	}
	if err := writeOutput(stdout, out, entries); err != nil {
		fmt.Fprintf(stderr, "render: %v\n", err)
		return exitFail
	}
	return code
}
