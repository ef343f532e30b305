package lint

import (
	"fmt"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/manifest"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// The rules a finding comes from.
const (
	RuleAPI     = "api"     // the API server refuses the pod
	RuleNode    = "node"    // kubelet fails the pod's sandbox (--strict)
	RuleTrim    = "trim"    // kubelet trims the pod's DNS config (--strict)
	RuleWarning = "warning" // the API server accepts it with a warning
)

// Finding is one problem at one field.
type Finding struct {
	Rule    string `json:"rule"`
	Field   string `json:"field"`
	Message string `json:"message"`
	// Line is the file line of the field, or of its nearest parent in
	// the manifest (0: not known).
	Line int `json:"line,omitempty"`
}

// Fails reports whether the finding fails the lint (all rules but warning).
func (f Finding) Fails() bool { return f.Rule != RuleWarning }

// Target is one pod template and where it was read.
type Target struct {
	Object manifest.Object
	// Template is the template's path in its object ("spec.template"),
	// "" for a Pod.
	Template string
	// Input is the engine's input, defaulted as the API server would.
	Input policy.Input
	// ownName: the template names itself; else metadata.name findings
	// are the object's.
	ownName bool
}

// Targets returns the pod templates of objs, and the number of objects
// skipped because their kind has no pod template.
func Targets(objs []manifest.Object) ([]Target, int, error) {
	var out []Target
	skipped := 0
	for _, o := range objs {
		if !podspec.HasTemplate(o.Kind) {
			skipped++
			continue
		}
		tpls, err := podspec.Templates(o.Kind, o.JSON)
		if err != nil {
			return nil, 0, &manifest.Error{Source: o.Source, Document: o.Document, Err: at(o, err)}
		}
		for _, t := range tpls {
			pod := t.Fields.Pod()
			podspec.Default(pod)
			tg := Target{Object: o, Input: podspec.Input(pod)}
			if t.Path != nil {
				tg.Template = t.Path.String()
				tg.ownName = t.Fields.Metadata.Name != o.Name || o.Name == ""
			}
			out = append(out, tg)
		}
	}
	return out, skipped, nil
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
	if t.Template != "" && !inherited && f != "" {
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
