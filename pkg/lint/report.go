package lint

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/manifest"
)

// Result is the outcome for one pod template: -o json's contract.
type Result struct {
	File       string    `json:"file"`
	Document   int       `json:"document"`
	Line       int       `json:"line,omitempty"`
	Item       *int      `json:"item,omitempty"`
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace"`
	Name       string    `json:"name"`
	Template   string    `json:"template"`
	Allowed    bool      `json:"allowed"`
	Findings   []Finding `json:"findings"`
}

// Summary counts what a run read and found.
type Summary struct {
	Files     int `json:"files"`
	Objects   int `json:"objects"`
	Templates int `json:"templates"`
	Skipped   int `json:"skipped"` // objects of kinds without a pod template
	Failed    int `json:"failed"`  // templates with an error finding
	Errors    int `json:"errors"`
	Warnings  int `json:"warnings"`
	// SkippedKinds names the kinds of the skipped objects.
	SkippedKinds []KindCount `json:"skippedKinds"`
}

// Report is the outcome of a run.
type Report struct {
	Results []Result `json:"results"`
	Summary Summary  `json:"summary"`
}

// Run checks every target. Each document is parsed for line numbers once,
// when the first of its targets has a finding (a List's items share its
// document), so a run is linear in its input. It stops with ctx's error
// when ctx ends (SIGTERM).
func Run(ctx context.Context, targets []Target, check Check) (Report, error) {
	r := Report{Results: []Result{}}
	type docKey struct {
		source string
		doc    int
	}
	locators := map[docKey]manifest.Locator{}
	for _, t := range targets {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		res := NewResult(t)
		var found []Finding
		if t.Problem != nil {
			found = []Finding{*t.Problem}
		} else {
			found = check(t.Input)
		}
		var loc manifest.Locator
		if len(found) > 0 {
			k := docKey{t.Object.Source, t.Object.Document}
			var ok bool
			if loc, ok = locators[k]; !ok {
				loc = t.Object.Locator()
				locators[k] = loc
			}
			loc = loc.For(t.Object)
		}
		for _, f := range found {
			f.Field = t.Field(f.Field)
			var whole bool
			f.Line, whole = loc.Find(f.Field)
			if !whole && f.alt != "" {
				f.Line = loc.FieldLine(t.Field(f.alt))
			}
			f.alt = ""
			res.Findings = append(res.Findings, f)
			if f.Fails() {
				res.Allowed = false
				r.Summary.Errors++
			} else {
				r.Summary.Warnings++
			}
		}
		if !res.Allowed {
			r.Summary.Failed++
		}
		r.Results = append(r.Results, res)
	}
	r.Summary.Templates = len(targets)
	return r, nil
}

// NewResult is a finding-free result for t.
func NewResult(t Target) Result {
	o := t.Object
	ns := t.Input.Namespace
	if t.Problem != nil {
		ns = o.Namespace
	}
	res := Result{File: displayName(o.Source), Document: o.Document, Line: o.Line, APIVersion: o.APIVersion,
		Kind: o.Kind, Namespace: ns, Name: o.Name, Template: t.Template, Allowed: true,
		Findings: []Finding{}}
	if o.Item >= 0 {
		item := o.Item
		res.Item = &item
	}
	return res
}

func displayName(src string) string {
	if src == manifest.Stdin {
		return "stdin"
	}
	return src
}

// Label names a result for a reader: "deploy.yaml:12 (document 2)
// Deployment shop/web", with ", items[3]" after the document number for
// an item of a List.
func (r Result) Label() string { return r.labelAt(r.Line) }

// labelAt is Label with the line of a finding.
func (r Result) labelAt(line int) string {
	loc := r.File
	if line > 0 {
		loc = fmt.Sprintf("%s:%d", loc, line)
	}
	doc := fmt.Sprintf("document %d", r.Document)
	if r.Item != nil {
		doc += fmt.Sprintf(", items[%d]", *r.Item)
	}
	kind := r.Kind
	if kind == "" {
		kind = "object"
	}
	return fmt.Sprintf("%s (%s) %s %s/%s", loc, doc, kind, r.Namespace, r.Name)
}

// WriteText prints one line per finding, "LABEL: FIELD: MESSAGE" (the
// label at the finding's line), with "warning: " before the field of a
// warning.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, res := range r.Results {
		for _, f := range res.Findings {
			kind := ""
			if !f.Fails() {
				kind = "warning: "
			}
			field := f.Field
			if field != "" {
				field += ": "
			}
			fmt.Fprintf(&b, "%s: %s%s%s\n", res.labelAt(f.Line), kind, field, f.Message)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String is the summary line, and a line naming the skipped kinds when
// objects were skipped.
func (s Summary) String() string {
	line := fmt.Sprintf("%d pod templates in %d objects (%d files; %d objects of other kinds skipped): %d with errors; %d errors, %d warnings",
		s.Templates, s.Objects, s.Files, s.Skipped, s.Failed, s.Errors, s.Warnings)
	if k := s.Kinds(); k != "" {
		line += "\n" + k
	}
	return line
}

// Kinds names the skipped kinds: "skipped (no pod template known): 2
// ConfigMap, 1 Workflow.example.com", or "" when none was skipped.
func (s Summary) Kinds() string {
	if len(s.SkippedKinds) == 0 {
		return ""
	}
	parts := make([]string, 0, len(s.SkippedKinds))
	for _, k := range s.SkippedKinds {
		parts = append(parts, fmt.Sprintf("%d %s", k.Objects, k.Kind))
	}
	return "skipped (no pod template known; --pod-template KIND.GROUP=PATH names one): " + strings.Join(parts, ", ")
}

// WriteJSON prints the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
