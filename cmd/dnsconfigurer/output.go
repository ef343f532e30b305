package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// The machine-readable -o formats; every command that prints a result
// offers both, with the same field names.
const (
	outJSON = "json"
	outYAML = "yaml"
	// outSARIF is validate's SARIF 2.1.0 log, for code-review tools.
	outSARIF = "sarif"
)

// checkOutput validates -o against the formats a command prints.
func checkOutput(out string, formats ...string) error {
	if slices.Contains(formats, out) {
		return nil
	}
	last := len(formats) - 1
	return fmt.Errorf("-o %q: must be %s or %s", out, strings.Join(formats[:last], ", "), formats[last])
}

// writeOutput prints v as indented JSON or as YAML (the JSON field names,
// sigs.k8s.io/yaml as kubectl -o yaml).
func writeOutput(w io.Writer, format string, v any) error {
	switch format {
	case outJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case outYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("output %q: not %s or %s", format, outJSON, outYAML)
}

// nonNil is s, or an empty list for nil: the JSON lists of the commands'
// output are [], never null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
