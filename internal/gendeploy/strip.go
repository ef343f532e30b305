package gendeploy

import (
	"fmt"
	"reflect"
	"strings"

	"sigs.k8s.io/yaml"
)

// dropAnnotation removes the annotation key from every annotations map of
// doc (a single-line "key: value"), and a map it leaves empty. It checks on
// the decoded documents that nothing else changed.
func dropAnnotation(doc, key string) (string, error) {
	lines := strings.Split(doc, "\n")
	var out []string
	found := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(strings.TrimSpace(l), key+":") {
			out = append(out, l)
			continue
		}
		found = true
		parent := len(out) - 1
		for parent >= 0 && (indent(out[parent]) >= indent(l) || strings.HasPrefix(strings.TrimSpace(out[parent]), "#")) {
			parent--
		}
		if parent < 0 || strings.TrimSpace(out[parent]) != "annotations:" {
			return "", fmt.Errorf("annotation %s is not in an annotations map", key)
		}
		// The map is empty without it when it was the only entry: first
		// after its parent, and the next line less indented.
		if parent == len(out)-1 && (i+1 >= len(lines) || indent(lines[i+1]) < indent(l)) {
			out = out[:parent]
		}
	}
	if !found {
		return doc, nil
	}
	got := strings.Join(out, "\n")
	var before, after map[string]any
	if err := yaml.Unmarshal([]byte(doc), &before); err != nil {
		return "", err
	}
	if err := yaml.Unmarshal([]byte(got), &after); err != nil {
		return "", fmt.Errorf("without annotation %s: %w", key, err)
	}
	deleteAnnotation(before, key)
	if !reflect.DeepEqual(before, after) {
		return "", fmt.Errorf("removing annotation %s changed more than the annotation", key)
	}
	return got, nil
}

// indent is the number of leading spaces of l.
func indent(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

// deleteAnnotation deletes key from every annotations map under v, and a
// map it leaves empty.
func deleteAnnotation(v any, key string) {
	switch v := v.(type) {
	case map[string]any:
		if a, ok := v["annotations"].(map[string]any); ok {
			if _, ok := a[key]; ok {
				delete(a, key)
				if len(a) == 0 {
					delete(v, "annotations")
				}
			}
		}
		for _, c := range v {
			deleteAnnotation(c, key)
		}
	case []any:
		for _, c := range v {
			deleteAnnotation(c, key)
		}
	}
}
