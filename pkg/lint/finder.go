package lint

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/manifest"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
)

// kubeGroups are the API groups of Kubernetes' own workload kinds: a
// Job of another group (batch.volcano.sh) is not a batch Job.
var kubeGroups = []string{"", "apps", "batch", "extensions"}

// Finder finds the pod templates of objects: those of Kubernetes' own
// workload kinds, and those its Paths name.
type Finder struct {
	Paths []TemplatePath
}

// NewFinder is a Finder for KnownTemplates and extra. A path of extra
// replaces the known paths of its kind and group.
func NewFinder(extra []TemplatePath) Finder {
	var f Finder
	for _, k := range KnownTemplates {
		if !slices.ContainsFunc(extra, func(p TemplatePath) bool { return p.Kind == k.Kind && (p.Group == "" || p.Group == k.Group) }) {
			f.Paths = append(f.Paths, k)
		}
	}
	f.Paths = append(f.Paths, extra...)
	return f
}

// Reads reports whether objects of kind may hold a pod template: the
// kinds a manifest read keeps with their JSON (manifest.Reader.Keep).
func (f Finder) Reads(kind string) bool {
	return podspec.HasTemplate(kind) || slices.ContainsFunc(f.Paths, func(p TemplatePath) bool { return p.Kind == kind })
}

// KindCount is how many objects of one kind a run skipped.
type KindCount struct {
	// Kind is KIND.GROUP, or KIND for the core group.
	Kind    string `json:"kind"`
	Objects int    `json:"objects"`
}

// Find returns the targets of objs in their order, and the kinds it
// skipped because no pod template is known for them, by name.
func (f Finder) Find(objs []manifest.Object) ([]Target, []KindCount) {
	var out []Target
	skipped := map[string]int{}
	for _, o := range objs {
		group := groupOf(o.APIVersion)
		switch {
		case o.Err != nil:
			fe := o.Err
			out = append(out, Target{Object: o, Problem: &Finding{Rule: RuleAPI, Field: fe.Field, Message: fe.Message}, err: fe})
		case podspec.HasTemplate(o.Kind) && slices.Contains(kubeGroups, group):
			out = append(out, kubeTargets(o)...)
		default:
			var paths []TemplatePath
			for _, p := range f.Paths {
				if p.matches(o.Kind, group) {
					paths = append(paths, p)
				}
			}
			if len(paths) == 0 {
				skipped[kindName(o.Kind, group)]++
				continue
			}
			out = append(out, pathTargets(o, paths)...)
		}
	}
	kinds := []KindCount{}
	for k, n := range skipped {
		kinds = append(kinds, KindCount{Kind: k, Objects: n})
	}
	slices.SortFunc(kinds, func(a, b KindCount) int { return strings.Compare(a.Kind, b.Kind) })
	return out, kinds
}

func groupOf(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return g
}

func kindName(kind, group string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}

// kubeTargets reads the template of an object of Kubernetes' own kinds.
func kubeTargets(o manifest.Object) []Target {
	tpls, err := podspec.Templates(o.Kind, o.JSON)
	if err != nil {
		return []Target{problem(o, o.JSON, "", err)}
	}
	var out []Target
	for _, t := range tpls {
		tg := target(o, t.Fields)
		if t.Path != nil {
			tg.Template = t.Path.String()
			tg.ownName = t.Fields.Metadata.Name != o.Name || o.Name == ""
		}
		out = append(out, tg)
	}
	return out
}

func target(o manifest.Object, f podspec.Fields) Target {
	pod := f.Pod()
	podspec.Default(pod)
	return Target{Object: o, Input: podspec.Input(pod)}
}

// problem is the target of an object whose template at path (the part
// js of the object) cannot be read.
func problem(o manifest.Object, js []byte, path string, err error) Target {
	f := Finding{Rule: RuleAPI, Field: path, Message: err.Error()}
	if fe, ok := manifest.TypeError(js, err); ok {
		f.Field, f.Message = join(path, fe.Field), fe.Message
	} else if msg, ok := strings.CutPrefix(f.Message, o.Kind+": "); ok {
		// podspec's "Deployment: spec.template: Required value".
		if field, m, ok := strings.Cut(msg, ": "); ok && !strings.Contains(field, " ") {
			f.Field, f.Message = join(path, field), m
		}
	}
	return Target{Object: o, Problem: &f, err: err}
}

// objectMeta is what a pod made from a PodSpec takes of its object.
type objectMeta struct {
	Metadata struct {
		Name         string `json:"name"`
		GenerateName string `json:"generateName"`
		Namespace    string `json:"namespace"`
	} `json:"metadata"`
}

// pathTargets reads the templates paths name in o. A template without
// its own name, and a PodSpec, are named by the object: the controller
// names its pods after it (Argo, Tekton and Knative add suffixes), so a
// name the API server refuses or truncates in a hostname is the pods'.
func pathTargets(o manifest.Object, paths []TemplatePath) []Target {
	var meta objectMeta
	_ = json.Unmarshal(o.JSON, &meta) // manifest read the same fields
	var out []Target
	for _, p := range paths {
		vals, err := p.walk(o.JSON)
		if pe, ok := err.(*pathError); ok {
			f := Finding{Rule: RuleAPI, Field: pe.field, Message: pe.msg}
			out = append(out, Target{Object: o, Problem: &f, err: err})
			continue
		}
		for _, v := range vals {
			out = append(out, pathTarget(o, meta, v))
		}
	}
	return out
}

func pathTarget(o manifest.Object, meta objectMeta, v found) Target {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(v.raw, &keys); err != nil {
		f := Finding{Rule: RuleAPI, Field: v.path, Message: "Invalid value: " + kindOf(v.raw) + ": must be a mapping"}
		return Target{Object: o, Problem: &f, err: fmt.Errorf("%s: %s", f.Field, f.Message)}
	}
	var fields podspec.Fields
	_, template := keys["spec"]
	var err error
	if template {
		err = json.Unmarshal(v.raw, &fields)
	} else {
		err = json.Unmarshal(v.raw, &fields.Spec)
	}
	if err != nil {
		return problem(o, v.raw, v.path, err)
	}
	m := &fields.Metadata
	m.Namespace = meta.Metadata.Namespace
	own := m.Name != ""
	if !own && m.GenerateName == "" {
		m.Name, m.GenerateName = meta.Metadata.Name, meta.Metadata.GenerateName
	}
	t := target(o, fields)
	t.Template, t.podSpec = v.path, !template
	t.ownName = own
	return t
}
