package corefile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Form is what an input holds.
type Form string

// The forms of Source.
const (
	// FormCorefile: a Corefile (Source.Text).
	FormCorefile Form = "Corefile"
	// FormCoreDNS: a coredns ConfigMap (Source.Data has the Corefile key).
	FormCoreDNS Form = "coredns ConfigMap"
	// FormKubeDNS: a kube-dns ConfigMap (stubDomains, upstreamNameservers).
	FormKubeDNS Form = "kube-dns ConfigMap"
	// FormNodeLocal: NodeLocal DNSCache's ConfigMap (its Corefile).
	FormNodeLocal Form = "NodeLocal DNSCache ConfigMap"
)

// Source is the configuration found in an input: a Corefile, or the one
// ConfigMap of a manifest, a kubectl List, a kubectl edit fragment or a
// single object that holds a DNS configuration.
type Source struct {
	Form Form
	// Text is the Corefile of FormCorefile.
	Text []byte
	// Data is the ConfigMap's data; for FormCoreDNS with the keys of the
	// coredns-custom ConfigMaps given with it added (the files its imports
	// read).
	Data map[string]string
	// Taken says which object of several was taken, and what else was
	// used ("" for a Corefile or a lone ConfigMap).
	Taken string
	// line is where the ConfigMap taken starts in the input.
	line int
}

// lineError is an error of the input at a line of it.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("%d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

// Bounds of one input: its bytes, its objects, and its ConfigMap keys
// (over all its objects). The API server takes a ConfigMap of at most
// 1 MiB; a kubectl List or a manifest holds several, so the bounds leave
// room: a 10 MiB input of 450,000 keys converts in about a second.
const (
	MaxInputBytes = 16 << 20
	MaxKeys       = 1_000_000
	maxObjects    = 1000
)

// object is the part of a Kubernetes object ReadSource reads.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Data  map[string]string `json:"data"`
	Items []json.RawMessage `json:"items"`
	// doc is the document's number (1-based) in the input, line the
	// line it starts on.
	doc, line int
}

func (o object) String() string {
	name := o.Metadata.Name
	if o.Metadata.Namespace != "" {
		name = o.Metadata.Namespace + "/" + name
	}
	if name == "" {
		name = "(no name)"
	}
	kind := o.Kind
	if kind == "" {
		kind = "ConfigMap fragment"
	}
	return kind + " " + name
}

// ReadSource finds the DNS configuration in text, an input named name. A
// YAML or JSON input with Kubernetes objects (kind:, or a kubectl edit
// fragment starting at data:) is read as such: several documents and
// kubectl's List are searched for the ConfigMap; anything else is a
// Corefile. An empty or binary input is an error, and so is one over
// MaxInputBytes or MaxKeys. It stops with ctx's error when ctx ends.
func ReadSource(ctx context.Context, name string, text []byte) (Source, error) {
	switch {
	case len(text) > MaxInputBytes:
		return Source{}, fmt.Errorf("%s:1: over %d MiB: convert reads at most %d MiB (a ConfigMap is at most 1 MiB)", name, MaxInputBytes>>20, MaxInputBytes>>20)
	case len(bytes.TrimSpace(text)) == 0:
		return Source{}, fmt.Errorf("%s:1: empty input: want a Corefile or a ConfigMap", name)
	case bytes.IndexByte(text, 0) >= 0 || !utf8.Valid(text):
		return Source{}, fmt.Errorf("%s:%d: binary input (not UTF-8 text): want a Corefile or a ConfigMap", name, badLine(text))
	}
	objs, isYAML, err := objects(ctx, text)
	if !isYAML || err != nil && ctx.Err() == nil {
		// A template's placeholder may be why it is no YAML (k3s's
		// %{CLUSTER_DNS}%); a Corefile has no __PILLAR__ node-cache fills.
		if err := findPlaceholder(name, text, 1, isYAML); err != nil {
			return Source{}, err
		}
	}
	if !isYAML {
		return Source{Form: FormCorefile, Text: text}, nil
	}
	if err != nil {
		var le *lineError
		if errors.As(err, &le) {
			return Source{}, fmt.Errorf("%s:%d: %w", name, le.line, le.err)
		}
		return Source{}, fmt.Errorf("%s:1: %w", name, err)
	}
	src, err := pick(name, objs)
	if err != nil {
		return src, err
	}
	return src, dataPlaceholder(name, text, src)
}

// dataPlaceholder finds an unrendered placeholder in the data of the
// ConfigMap taken, placed at its line in text.
func dataPlaceholder(name string, text []byte, src Source) error {
	var held []string
	for k, v := range src.Data {
		if mayHold(v) {
			held = append(held, k)
		}
	}
	sort.Strings(held)
	for _, k := range held {
		err := findPlaceholder(name, []byte(src.Data[k]), 1, src.Form == FormNodeLocal)
		pe, ok := err.(*placeholderError)
		if !ok {
			continue
		}
		pe.line = src.line
		lines := strings.Split(string(text), "\n")
		for i := max(src.line, 1) - 1; i < len(lines); i++ {
			if strings.Contains(lines[i], pe.text) {
				pe.line = i + 1
				break
			}
		}
		return pe
	}
	return nil
}

// ConvertInput converts the input text named name, as ReadSource finds it: a
// Corefile, or a coredns, kube-dns or NodeLocal DNSCache ConfigMap.
// Imports are imports' files when set (a directory); else a ConfigMap's
// imports read its other keys, in memory, and a Corefile's its own
// directory. keys says what a coredns ConfigMap carries into the output
// (its Data is set here). The report opens with the object taken of
// several.
func ConvertInput(ctx context.Context, name string, text []byte, imports fs.FS, keys ConfigMapKeys) (Result, error) {
	src, err := ReadSource(ctx, name, text)
	if err != nil {
		return Result{}, err
	}
	r, err := convertSource(ctx, name, src, imports, keys)
	if ke := (keyError{}); err != nil && (src.Form == FormKubeDNS || errors.As(err, &ke)) {
		err = placeData(name, text, src.line, err)
	}
	if err == nil && src.Taken != "" {
		r.Findings = append([]Finding{{Where: name, Plugin: "input", Status: Converted, Reason: src.Taken}}, r.Findings...)
	}
	return r, err
}

// convertSource converts what ReadSource found.
func convertSource(ctx context.Context, name string, src Source, imports fs.FS, keys ConfigMapKeys) (Result, error) {
	switch src.Form {
	case FormCorefile:
		return Run(ctx, Input{Name: name, Text: src.Text, Imports: imports}, nil)
	case FormKubeDNS:
		return KubeDNS(src.Data)
	}
	if imports == nil {
		k, err := KeysFS(src.Data)
		if err != nil {
			return Result{}, err
		}
		imports = k
	}
	in := Input{Name: "Corefile", Text: []byte(src.Data["Corefile"]), Imports: imports}
	if src.Form == FormNodeLocal {
		return NodeLocal(ctx, in)
	}
	keys.Data = src.Data
	return Run(ctx, in, &keys)
}

// badLine is the first line of text that is not UTF-8 or holds a NUL.
func badLine(text []byte) int {
	for i, l := range bytes.Split(text, []byte("\n")) {
		if bytes.IndexByte(l, 0) >= 0 || !utf8.Valid(l) {
			return i + 1
		}
	}
	return 1
}

// yamlLine is the line a YAML error names ("yaml: line 4: ...").
var yamlLine = regexp.MustCompile(`yaml: line (\d+): `)

// docError places err, of the document starting at line first: at the
// line it names, if any, else at the document's first.
func docError(first, doc int, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatchIndex(msg); m != nil {
		n, _ := strconv.Atoi(msg[m[2]:m[3]])
		return &lineError{first + n - 1, fmt.Errorf("document %d: %s", doc, msg[:m[0]]+"yaml: "+msg[m[1]:])}
	}
	return &lineError{first, fmt.Errorf("document %d: %s", doc, msg)}
}

// keyError is a ConfigMap key's error, placed by placeData.
type keyError struct{ error }

// dataKey is the ConfigMap key an error names first: "data.KEY: ..." of
// KubeDNS, or KeysFS's "configmap key "KEY": ...".
var dataKey = regexp.MustCompile(`^data\.([^:.\s]+)|^configmap key "([^"]+)"`)

// placeData puts a ConfigMap key's error at the key's line in the
// document starting at line first of text, else at that line.
func placeData(name string, text []byte, first int, err error) error {
	line := max(first, 1)
	if m := dataKey.FindStringSubmatch(err.Error()); m != nil {
		key := m[1] + m[2]
		re := regexp.MustCompile(`^\s*"?` + regexp.QuoteMeta(key) + `"?\s*:`)
		for i, l := range strings.Split(string(text), "\n")[line-1:] {
			if re.MatchString(l) {
				line += i
				break
			}
		}
	}
	return fmt.Errorf("%s:%d: %w", name, line, err)
}

// docSep is a YAML document separator line.
var docSep = regexp.MustCompile(`(?m)^---[ \t]*(?:#.*)?$`)

// documents splits text at its document separators; lines are the
// lines each starts on.
func documents(text []byte) (docs [][]byte, lines []int) {
	if !bytes.Contains(text, []byte("---")) {
		return [][]byte{text}, []int{1}
	}
	last, line := 0, 1
	for _, m := range docSep.FindAllIndex(text, -1) {
		docs, lines = append(docs, text[last:m[0]]), append(lines, line)
		end := m[1]
		if end < len(text) && text[end] == '\n' {
			end++ // the next document starts on the line after
		}
		line += bytes.Count(text[last:end], []byte("\n"))
		last = end
	}
	return append(docs, text[last:]), append(lines, line)
}

// objects reads the Kubernetes objects of text; isYAML is false when its
// first document is not a mapping with kind, apiVersion or data (a
// Corefile). It stops with ctx's error between documents.
func objects(ctx context.Context, text []byte) (objs []object, isYAML bool, err error) {
	first := true
	keys := 0
	docs, lines := documents(text)
	for i, d := range docs {
		if err := ctx.Err(); err != nil {
			return nil, true, err
		}
		doc := i + 1
		dec, err := decodeDoc(d)
		if err != nil {
			if first {
				return nil, false, nil
			}
			return nil, true, docError(lines[i], doc, err)
		}
		if dec.empty {
			continue
		}
		if first && !dec.marked {
			return nil, false, nil
		}
		first = false
		if dec.err != nil {
			return nil, true, docError(lines[i], doc, dec.err)
		}
		found := []object{dec.obj}
		if strings.HasSuffix(dec.obj.Kind, "List") {
			found = dec.items
		}
		for _, o := range found {
			o.doc, o.line = doc, lines[i]
			keys += len(o.Data)
			objs = append(objs, o)
		}
		if len(objs) > maxObjects {
			return nil, true, &lineError{lines[i], fmt.Errorf("more than %d objects", maxObjects)}
		}
		if keys > MaxKeys {
			return nil, true, &lineError{lines[i], fmt.Errorf("more than %d ConfigMap keys: convert reads at most %d", MaxKeys, MaxKeys)}
		}
	}
	if first {
		return nil, false, nil
	}
	return objs, true, nil
}

// role is what a ConfigMap is to the conversion.
func role(o object) Form {
	if o.Kind != "" && o.Kind != "ConfigMap" {
		return ""
	}
	if _, ok := o.Data["Corefile"]; ok {
		n := strings.ToLower(o.Metadata.Name)
		if strings.Contains(n, "nodelocal") || strings.Contains(n, "node-local") || strings.Contains(o.Data["Corefile"], "__PILLAR__") {
			return FormNodeLocal
		}
		return FormCoreDNS
	}
	if _, ok := o.Data["stubDomains"]; ok {
		return FormKubeDNS
	}
	if _, ok := o.Data["upstreamNameservers"]; ok {
		return FormKubeDNS
	}
	return ""
}

// isCustom: a coredns-custom ConfigMap (AKS, k3s): imported keys only.
func isCustom(o object) bool {
	if o.Kind != "" && o.Kind != "ConfigMap" || len(o.Data) == 0 {
		return false
	}
	if o.Metadata.Name == "coredns-custom" {
		return true
	}
	for k := range o.Data {
		if !strings.HasSuffix(k, ".server") && !strings.HasSuffix(k, ".override") && !strings.HasSuffix(k, ".include") {
			return false
		}
	}
	return true
}

// pick takes the ConfigMap to convert among objs.
func pick(name string, objs []object) (Source, error) {
	var found, custom []object
	kinds := map[string]int{}
	for _, o := range objs {
		kind := o.Kind
		if kind == "" {
			kind = "fragment"
		}
		kinds[kind]++
		switch {
		case role(o) != "":
			found = append(found, o)
		case isCustom(o):
			custom = append(custom, o)
		}
	}
	if len(found) > 1 {
		// A manifest may hold NodeLocal DNSCache's and CoreDNS's: take
		// the one named coredns.
		var named []object
		for _, o := range found {
			if o.Metadata.Name == "coredns" {
				named = append(named, o)
			}
		}
		if len(named) != 1 {
			var list []string
			for _, o := range found {
				list = append(list, fmt.Sprintf("%s (document %d, line %d, %s)", o, o.doc, o.line, role(o)))
			}
			return Source{}, fmt.Errorf("%s:%d: %d DNS ConfigMaps and none named coredns: %s; give one of them", name, found[1].line, len(found), strings.Join(list, ", "))
		}
		found = named
	}
	if len(found) == 0 {
		if len(custom) > 0 {
			return Source{}, fmt.Errorf("%s:%d: %s is a coredns-custom ConfigMap (keys %s): it only adds server blocks and overrides to a coredns ConfigMap; "+
				"give the coredns ConfigMap with it (both in one file, or the coredns ConfigMap with --import-dir holding these keys)",
				name, custom[0].line, custom[0], strings.Join(keys(custom[0].Data), ", "))
		}
		var list []string
		for k, n := range kinds {
			list = append(list, fmt.Sprintf("%d %s", n, k))
		}
		sort.Strings(list)
		return Source{}, fmt.Errorf("%s:1: no ConfigMap with data.Corefile (coredns, NodeLocal DNSCache) or data.stubDomains or data.upstreamNameservers (kube-dns) among its objects (%s)",
			name, strings.Join(list, ", "))
	}
	o := found[0]
	s := Source{Form: role(o), Data: o.Data, line: o.line}
	var used []string
	if len(objs) > 1 {
		used = append(used, fmt.Sprintf("%s (document %d of the input)", o, o.doc))
	}
	if s.Form == FormCoreDNS && len(custom) > 0 {
		s.Data = map[string]string{}
		for k, v := range o.Data {
			s.Data[k] = v
		}
		for _, c := range custom {
			for k, v := range c.Data {
				if _, dup := s.Data[k]; dup {
					return Source{}, fmt.Errorf("%s:%d: key %s is in %s and in %s (line %d)", name, c.line, k, c, o, o.line)
				}
				s.Data[k] = v
			}
			used = append(used, fmt.Sprintf("the keys of %s as the files its imports read", c))
		}
	}
	if len(used) > 0 {
		s.Taken = "took " + strings.Join(used, ", with ")
	}
	return s, nil
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
