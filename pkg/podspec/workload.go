package podspec

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Template is one pod template of a workload (or a Pod itself), reduced to
// the engine's fields.
type Template struct {
	// Path is where the template sits in its object, as the API server
	// words field errors: "spec.template" for a Deployment,
	// "spec.jobTemplate.spec.template" for a CronJob, "template" for a
	// PodTemplate, nil for a Pod. Its spec is Path.Child("spec").
	Path *field.Path
	// Fields holds the template's metadata and spec. The namespace is the
	// workload's (a template has none of its own); the name is the
	// workload's when the template has none.
	Fields Fields
	// NodeSelector is the template's spec.nodeSelector.
	NodeSelector NodeSelector
}

// templatePaths maps each kind that carries a pod template (group-less kind
// names: the kinds are unique across apps, batch and core) to the JSON path
// of the template.
var templatePaths = map[string][]string{
	"Pod":                   nil,
	"PodTemplate":           {"template"},
	"ReplicationController": {"spec", "template"},
	"Deployment":            {"spec", "template"},
	"ReplicaSet":            {"spec", "template"},
	"StatefulSet":           {"spec", "template"},
	"DaemonSet":             {"spec", "template"},
	"Job":                   {"spec", "template"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template"},
}

// TemplateKinds lists the kinds Templates reads, sorted.
func TemplateKinds() []string {
	kinds := make([]string, 0, len(templatePaths))
	for k := range templatePaths {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}

// HasTemplate reports whether Templates reads kind.
func HasTemplate(kind string) bool {
	_, ok := templatePaths[kind]
	return ok
}

// pathKeys holds the keys a template path goes through, undecoded and
// not copied.
type pathKeys struct {
	Metadata    Meta    `json:"metadata"`
	Spec        RawJSON `json:"spec"`
	Template    RawJSON `json:"template"`
	JobTemplate RawJSON `json:"jobTemplate"`
}

func (s pathKeys) get(key string) RawJSON {
	switch key {
	case "spec":
		return s.Spec
	case "template":
		return s.Template
	case "jobTemplate":
		return s.JobTemplate
	}
	return nil
}

// Templates returns the pod template of obj, the JSON of an object of the
// given kind: one Template, or an error for a kind without templates or
// JSON that does not hold one where the kind has it. Fields other than
// the engine's are not read, so they are not checked either; a key that
// is read, repeated in its object, is an error (Unmarshal).
func Templates(kind string, obj []byte) ([]Template, error) {
	steps, ok := templatePaths[kind]
	if !ok {
		return nil, fmt.Errorf("kind %q has no pod template; known kinds: %v", kind, TemplateKinds())
	}
	// One decode per step, each reading only the keys a path uses: the
	// object's JSON is scanned once, then each smaller part once.
	var top pathKeys
	if err := Unmarshal(obj, &top); err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	raw := RawJSON(obj)
	var path *field.Path
	for i, s := range steps {
		at := top
		if i > 0 {
			at = pathKeys{}
			if err := Unmarshal(raw, &at); err != nil {
				return nil, fmt.Errorf("%s %s: %w", kind, path, err)
			}
		}
		if path == nil {
			path = field.NewPath(s)
		} else {
			path = path.Child(s)
		}
		next := at.get(s)
		if len(next) == 0 || string(next) == "null" {
			return nil, fmt.Errorf("%s: %s: Required value", kind, path)
		}
		raw = next
	}
	var f struct {
		Fields
		Spec struct {
			Spec
			NodeSelector NodeSelector `json:"nodeSelector"`
		} `json:"spec"`
	}
	if err := Unmarshal(raw, &f); err != nil {
		at := kind
		if path != nil {
			at += " " + path.String()
		}
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	t := Template{Path: path, Fields: Fields{Metadata: f.Metadata, Spec: f.Spec.Spec}, NodeSelector: f.Spec.NodeSelector}
	if path != nil {
		m := &t.Fields.Metadata
		m.Namespace = top.Metadata.Namespace
		if m.Name == "" && m.GenerateName == "" {
			m.Name = top.Metadata.Name
		}
		m.UID = top.Metadata.UID
	}
	return []Template{t}, nil
}
