package manifest

import (
	"bytes"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Locator finds the line of a field in one object's document.
type Locator struct {
	root *yaml.Node
	// first and last are the file lines of the document text's first
	// and last line, counted in '\n's (YAML also breaks lines at a lone
	// '\r'; a line past last is last).
	first, last int
	// fallback is the object's line.
	fallback int
}

// Locator parses the object's document for FieldLine. It is cheap to
// skip: call it only for an object with findings.
func (o Object) Locator() Locator {
	l := Locator{first: o.rawLine, last: o.rawLine + bytes.Count(bytes.TrimSuffix(o.raw, []byte("\n")), []byte("\n")), fallback: o.Line}
	if o.rawLine == 0 || o.raw == nil {
		return l
	}
	var n yaml.Node
	if err := yaml.Unmarshal(o.raw, &n); err != nil || len(n.Content) == 0 {
		return l
	}
	l.root = n.Content[0]
	return l
}

// For is l for another object of the same document (a List's item): its
// own line is the fallback.
func (l Locator) For(o Object) Locator {
	l.fallback = o.Line
	return l
}

// FieldLine is the file line of the deepest node on path that the
// document holds, such as "items[1].spec.template.spec.dnsConfig.searches[32]"
// (a missing field is reported where its parent is), or the object's line.
func (l Locator) FieldLine(path string) int {
	line, _ := l.Find(path)
	return line
}

// Find is FieldLine, and whether the document holds the whole path.
func (l Locator) Find(path string) (int, bool) {
	if l.root == nil {
		return l.fallback, false
	}
	n, line, whole := l.root, 0, true
	for _, step := range steps(path) {
		next, at := child(n, step)
		if next == nil {
			whole = false
			break
		}
		n, line = next, at
	}
	if line == 0 {
		return l.fallback, false
	}
	return min(l.first+line-1, l.last), whole
}

// steps splits a field path: "a.b[2].c[x.y/z]" is a, b, 2, c, x.y/z.
func steps(path string) []string {
	var out []string
	var cur strings.Builder
	depth := 0
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	for _, r := range path {
		switch {
		case r == '[' && depth == 0:
			flush()
			depth++
		case r == ']' && depth == 1:
			out = append(out, cur.String())
			cur.Reset()
			depth--
		case r == '.' && depth == 0:
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return out
}

// child is the value under key step of a mapping, with the key's line
// (where the field is written), or the element at index step of a
// sequence, with its line.
func child(n *yaml.Node, step string) (*yaml.Node, int) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Value == step {
				return n.Content[i+1], k.Line
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(step); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i], n.Content[i].Line
		}
	}
	return nil, 0
}
