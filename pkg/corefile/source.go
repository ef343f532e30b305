package corefile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
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
}

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
	// doc is the document's number (1-based) in the input.
	doc int
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
		return Source{}, fmt.Errorf("%s: over %d MiB: convert reads at most %d MiB (a ConfigMap is at most 1 MiB)", name, MaxInputBytes>>20, MaxInputBytes>>20)
	case len(bytes.TrimSpace(text)) == 0:
		return Source{}, fmt.Errorf("%s: empty input: want a Corefile or a ConfigMap", name)
	case bytes.IndexByte(text, 0) >= 0 || !utf8.Valid(text):
		return Source{}, fmt.Errorf("%s: binary input (not UTF-8 text): want a Corefile or a ConfigMap", name)
	}
	objs, isYAML, err := objects(ctx, text)
	if !isYAML {
		return Source{Form: FormCorefile, Text: text}, nil
	}
	if err != nil {
		return Source{}, fmt.Errorf("%s: %w", name, err)
	}
	return pick(name, objs)
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

// docSep is a YAML document separator line.
var docSep = regexp.MustCompile(`(?m)^---[ \t]*(?:#.*)?$`)

// documents splits text at its document separators.
func documents(text []byte) [][]byte {
	if !bytes.Contains(text, []byte("---")) {
		return [][]byte{text}
	}
	var docs [][]byte
	last := 0
	for _, m := range docSep.FindAllIndex(text, -1) {
		docs = append(docs, text[last:m[0]])
		last = m[1]
	}
	return append(docs, text[last:])
}

// objects reads the Kubernetes objects of text; isYAML is false when its
// first document is not a mapping with kind, apiVersion or data (a
// Corefile). It stops with ctx's error between documents.
func objects(ctx context.Context, text []byte) (objs []object, isYAML bool, err error) {
	first := true
	keys := 0
	for i, d := range documents(text) {
		if err := ctx.Err(); err != nil {
			return nil, true, err
		}
		doc := i + 1
		dec, err := decodeDoc(d)
		if err != nil {
			if first {
				return nil, false, nil
			}
			return nil, true, fmt.Errorf("document %d: %v", doc, err)
		}
		if dec.empty {
			continue
		}
		if first && !dec.marked {
			return nil, false, nil
		}
		first = false
		if dec.err != nil {
			return nil, true, fmt.Errorf("document %d: %v", doc, dec.err)
		}
		found := []object{dec.obj}
		if strings.HasSuffix(dec.obj.Kind, "List") {
			found = dec.items
		}
		for _, o := range found {
			o.doc = doc
			keys += len(o.Data)
			objs = append(objs, o)
		}
		if len(objs) > maxObjects {
			return nil, true, fmt.Errorf("more than %d objects", maxObjects)
		}
		if keys > MaxKeys {
			return nil, true, fmt.Errorf("more than %d ConfigMap keys: convert reads at most %d", MaxKeys, MaxKeys)
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
				list = append(list, fmt.Sprintf("%s (document %d, %s)", o, o.doc, role(o)))
			}
			return Source{}, fmt.Errorf("%s: %d DNS ConfigMaps and none named coredns: %s; give one of them", name, len(found), strings.Join(list, ", "))
		}
		found = named
	}
	if len(found) == 0 {
		if len(custom) > 0 {
			return Source{}, fmt.Errorf("%s: %s is a coredns-custom ConfigMap (keys %s): it only adds server blocks and overrides to a coredns ConfigMap; "+
				"give the coredns ConfigMap with it (both in one file, or the coredns ConfigMap with --import-dir holding these keys)",
				name, custom[0], strings.Join(keys(custom[0].Data), ", "))
		}
		var list []string
		for k, n := range kinds {
			list = append(list, fmt.Sprintf("%d %s", n, k))
		}
		sort.Strings(list)
		return Source{}, fmt.Errorf("%s: no ConfigMap with data.Corefile (coredns, NodeLocal DNSCache) or data.stubDomains or data.upstreamNameservers (kube-dns) among its objects (%s)",
			name, strings.Join(list, ", "))
	}
	o := found[0]
	s := Source{Form: role(o), Data: o.Data}
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
					return Source{}, fmt.Errorf("%s: key %s is in %s and in %s", name, k, c, o)
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
