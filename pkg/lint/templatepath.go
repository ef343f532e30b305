package lint

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// TemplatePath is where objects of one kind keep pod templates: a dot
// path to a PodTemplateSpec (a mapping with a spec) or to a PodSpec,
// with [] or [*] for every item of a list and [N] for one item.
type TemplatePath struct {
	Kind string
	// Group is the API group ("argoproj.io"); "" matches any group.
	Group string
	// Path is the path as written: "spec.taskRunSpecs[*].podTemplate".
	Path  string
	steps []pathStep
}

// pathStep is a key, or an item of a list: every item (index -1) or one.
type pathStep struct {
	key   string
	list  bool
	index int
}

// ParseTemplatePath reads KIND[.GROUP]=PATH, as --pod-template takes it.
func ParseTemplatePath(s string) (TemplatePath, error) {
	kg, path, ok := strings.Cut(s, "=")
	if !ok || kg == "" || path == "" {
		return TemplatePath{}, fmt.Errorf("%q: want KIND[.GROUP]=PATH, such as Workflow.argoproj.io=spec", s)
	}
	kind, group, _ := strings.Cut(kg, ".")
	if kind == "" || strings.ContainsAny(kind, "/ ") || strings.ContainsAny(group, "/ ") {
		return TemplatePath{}, fmt.Errorf("%q: want KIND[.GROUP]=PATH with a kind such as Workflow and a group such as argoproj.io", s)
	}
	steps, err := parseSteps(path)
	if err != nil {
		return TemplatePath{}, fmt.Errorf("%q: %w", s, err)
	}
	return TemplatePath{Kind: kind, Group: group, Path: path, steps: steps}, nil
}

func parseSteps(path string) ([]pathStep, error) {
	var out []pathStep
	for _, part := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key == "" {
			return nil, fmt.Errorf("path %q: an empty key", path)
		}
		out = append(out, pathStep{key: key})
		for rest != "" {
			idx, after, ok := strings.Cut(rest, "]")
			if !ok || (after != "" && after[0] != '[') {
				return nil, fmt.Errorf("path %q: want [], [*] or [N] after a key", path)
			}
			st := pathStep{list: true, index: -1}
			if idx != "" && idx != "*" {
				n, err := strconv.Atoi(idx)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("path %q: %q is not a list index", path, idx)
				}
				st.index = n
			}
			out = append(out, st)
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return out, nil
}

func (p TemplatePath) String() string {
	kg := p.Kind
	if p.Group != "" {
		kg += "." + p.Group
	}
	return kg + "=" + p.Path
}

// matches reports whether the path is for an object of kind in group.
func (p TemplatePath) matches(kind, group string) bool {
	return p.Kind == kind && (p.Group == "" || p.Group == group)
}

// KnownTemplates are the pod templates of common workload kinds outside
// Kubernetes that validate reads with no flag. Each path was taken from
// the kind's API types: Argo Workflows sets the pod's dnsPolicy,
// dnsConfig and hostNetwork from the workflow spec; Tekton from a pod
// template (v1 and v1beta1 paths); Knative Serving from a revision's
// PodSpec.
var KnownTemplates = mustPaths(
	"Workflow.argoproj.io=spec",
	"WorkflowTemplate.argoproj.io=spec",
	"ClusterWorkflowTemplate.argoproj.io=spec",
	"CronWorkflow.argoproj.io=spec.workflowSpec",
	"TaskRun.tekton.dev=spec.podTemplate",
	"PipelineRun.tekton.dev=spec.taskRunTemplate.podTemplate",
	"PipelineRun.tekton.dev=spec.taskRunSpecs[*].podTemplate",
	"PipelineRun.tekton.dev=spec.podTemplate",
	"PipelineRun.tekton.dev=spec.taskRunSpecs[*].taskPodTemplate",
	"Service.serving.knative.dev=spec.template",
	"Configuration.serving.knative.dev=spec.template",
	"Revision.serving.knative.dev=spec",
)

func mustPaths(ss ...string) []TemplatePath {
	out := make([]TemplatePath, 0, len(ss))
	for _, s := range ss {
		p, err := ParseTemplatePath(s)
		if err != nil {
			panic(err)
		}
		out = append(out, p)
	}
	return out
}

// found is one value a path names in an object.
type found struct {
	path string // with indexes: "spec.taskRunSpecs[2].podTemplate"
	raw  json.RawMessage
}

// walk returns the values the path names in js. A key or item that is
// not there is no value; a value of the wrong kind on the way is an
// error at its path.
func (p TemplatePath) walk(js json.RawMessage) ([]found, error) {
	cur := []found{{raw: js}}
	for _, st := range p.steps {
		var next []found
		for _, f := range cur {
			if isNull(f.raw) {
				continue
			}
			if !st.list {
				var m map[string]json.RawMessage
				if err := json.Unmarshal(f.raw, &m); err != nil {
					return nil, &pathError{f.path, "Invalid value: " + kindOf(f.raw) + ": must be a mapping"}
				}
				if v, ok := m[st.key]; ok {
					next = append(next, found{join(f.path, st.key), v})
				}
				continue
			}
			var items []json.RawMessage
			if err := json.Unmarshal(f.raw, &items); err != nil {
				return nil, &pathError{f.path, "Invalid value: " + kindOf(f.raw) + ": must be a list"}
			}
			for i, v := range items {
				if st.index < 0 || st.index == i {
					next = append(next, found{fmt.Sprintf("%s[%d]", f.path, i), v})
				}
			}
		}
		cur = next
	}
	var out []found
	for _, f := range cur {
		if !isNull(f.raw) {
			out = append(out, f)
		}
	}
	return out, nil
}

// pathError is a value of the wrong kind on a template path.
type pathError struct{ field, msg string }

func (e *pathError) Error() string { return e.field + ": " + e.msg }

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// kindOf names a JSON value's kind for a message.
func kindOf(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	switch {
	case s == "":
		return "nothing"
	case s[0] == '{':
		return "a mapping"
	case s[0] == '[':
		return "a list"
	case s[0] == '"':
		return "a string"
	case s == "true" || s == "false":
		return "a boolean"
	}
	return "a number"
}
