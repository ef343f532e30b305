package lint

import (
	"fmt"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/manifest"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// The rules a finding comes from.
const (
	RuleAPI     = "api"     // the API server refuses the pod
	RuleNode    = "node"    // kubelet fails the pod's sandbox (--strict)
	RuleTrim    = "trim"    // kubelet trims the pod's DNS config (--strict)
	RuleWarning = "warning" // accepted, with a warning: the API server's or kubelet's
)

// Finding is one problem at one field.
type Finding struct {
	Rule    string `json:"rule"`
	Field   string `json:"field"`
	Message string `json:"message"`
	// Line is the file line of the field, or of its nearest parent in
	// the manifest (0: not known).
	Line int `json:"line,omitempty"`
	// alt is where to look for the line when Field is not written (a
	// defaulted field): a field of the same template.
	alt string
}

// Fails reports whether the finding fails the lint (all rules but warning).
func (f Finding) Fails() bool { return f.Rule != RuleWarning }

// Target is one pod template and where it was read, or an object that
// cannot be read with the problem that says why.
type Target struct {
	Object manifest.Object
	// Template is the template's path in its object ("spec.template"),
	// "" for a Pod.
	Template string
	// Input is the engine's input, defaulted as the API server would.
	Input policy.Input
	// Problem is why the object or its template cannot be read: the API
	// server refuses it whole. Input is then empty, and the problem is
	// the target's one finding. Its field is the object's.
	Problem *Finding
	// err is the problem as render reports it (Targets).
	err error
	// ownName: the template names itself; else metadata.name findings
	// are the object's.
	ownName bool
	// podSpec: Template is a PodSpec, not a PodTemplateSpec; the pod's
	// metadata is the object's.
	podSpec bool
}

// Targets returns the pod templates of objs of Kubernetes' own kinds,
// and the number of objects of other kinds; an object that cannot be
// read is an error. render reads its input so; validate reports such an
// object as a finding (Finder).
func Targets(objs []manifest.Object) ([]Target, int, error) {
	targets, skipped := Finder{}.Find(objs)
	n := 0
	for _, k := range skipped {
		n += k.Objects
	}
	for _, t := range targets {
		if t.err != nil {
			o := t.Object
			return nil, 0, &manifest.Error{Source: o.Source, Document: o.Document, Err: at(o, t.err)}
		}
	}
	return targets, n, nil
}

// at names the List item an error is in.
func at(o manifest.Object, err error) error {
	if p := o.Prefix(); p != "" {
		return fmt.Errorf("%s: %w", p, err)
	}
	return err
}

// Field is the full path of a field of the template in its document:
// "spec.dnsConfig.searches[32]" becomes
// "items[2].spec.template.spec.dnsConfig.searches[32]" for a Deployment
// that is the third item of a List.
func (t Target) Field(f string) string {
	parts := []string{}
	if p := t.Object.Prefix(); p != "" {
		parts = append(parts, p)
	}
	inherited := strings.HasPrefix(f, "metadata.namespace") ||
		(strings.HasPrefix(f, "metadata.name") && !t.ownName)
	switch {
	case t.Problem != nil || f == "":
	case t.podSpec && (f == "spec" || strings.HasPrefix(f, "spec.")):
		f = t.Template + strings.TrimPrefix(f, "spec")
	case t.podSpec && strings.HasPrefix(f, "metadata"):
	case t.Template != "" && !inherited:
		parts = append(parts, t.Template)
	}
	if f != "" {
		parts = append(parts, f)
	}
	return strings.Join(parts, ".")
}

// Check returns the findings for one template's input.
type Check func(policy.Input) []Finding

// APICheck checks as the API server does.
func APICheck(in policy.Input) []Finding {
	v := policy.ValidateAPI(in)
	return append(findings(RuleAPI, v.Errors), warnings(v.Warnings)...)
}

// NodeCheck checks as the API server does, and as the node would: what
// kubelet fails (rule node) or trims (rule trim).
func NodeCheck(eng *policy.Engine, host policy.Host) Check {
	return func(in policy.Input) []Finding {
		api := policy.ValidateAPI(in)
		v := eng.ValidateNode(in, host)
		seen := map[policy.FieldError]bool{}
		for _, e := range api.Errors {
			seen[e] = true
		}
		var out []Finding
		for _, e := range v.Errors {
			rule := RuleAPI
			if !seen[e] {
				rule = RuleNode
			}
			out = append(out, Finding{Rule: rule, Field: e.Field, Message: e.Message})
		}
		out = append(out, findings(RuleTrim, v.Trims)...)
		return append(out, warnings(v.Warnings)...)
	}
}

func findings(rule string, errs []policy.FieldError) []Finding {
	var out []Finding
	for _, e := range errs {
		out = append(out, Finding{Rule: rule, Field: e.Field, Message: e.Message})
	}
	return out
}

// warnings splits "field: message" warnings where they name a field.
func warnings(ws []string) []Finding {
	var out []Finding
	for _, w := range ws {
		f := Finding{Rule: RuleWarning, Message: w}
		if field, msg, ok := strings.Cut(w, ": "); ok && !strings.ContainsAny(field, " \"") {
			f.Field, f.Message = field, msg
		}
		out = append(out, f)
	}
	return out
}
