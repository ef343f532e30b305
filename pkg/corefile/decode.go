package corefile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"
)

// decoded is one YAML document of an input, read as a Kubernetes object.
type decoded struct {
	// empty: a null document (nothing, or comments only).
	empty bool
	// marked: it has kind, apiVersion or data, so the input is YAML.
	marked bool
	obj    object
	// items are a List's objects.
	items []object
	// err says why the document, YAML, is no object (after "document N: ").
	err error
}

// decodeDoc reads document d. It takes the fast path when that path can
// vouch for giving what the exact one gives, else the exact one. A YAML
// error is returned as such: the input may be a Corefile.
//
// The exact path is sigs.k8s.io/yaml into a map, then encoding/json into
// the object: three passes, maps built and sorted. On a 10 MiB ConfigMap
// of 455,000 small keys it takes 5.4 s and allocates 659 MB; the fast
// path, one go.yaml pass into ordered slices, 1.6 s and 346 MB, on a
// loaded two-core machine (BenchmarkDecode). TestDecodeAgrees and
// FuzzDecode hold the two paths equal.
func decodeDoc(d []byte) (decoded, error) {
	// go.yaml drops a merge key's entries from a MapSlice ("<<").
	if bytes.Contains(d, []byte("<<")) {
		return exactDoc(d)
	}
	var ms *yamlv2.MapSlice // nil for a null document, not for {}
	if err := yamlv2.Unmarshal(d, &ms); err == nil {
		if ms == nil {
			return decoded{empty: true}, nil
		}
		// An empty MapSlice may be {} or []: the exact path tells.
		if dec, ok := fastDoc(*ms); ok && len(*ms) > 0 {
			return dec, nil
		}
	}
	return exactDoc(d)
}

// exactDoc is the reference: YAML 1.1 values made JSON by sigs.k8s.io/yaml,
// then the object's fields by encoding/json, as the API server reads it.
func exactDoc(d []byte) (decoded, error) {
	var v map[string]any
	if err := yaml.Unmarshal(d, &v); err != nil {
		return decoded{}, err
	}
	if v == nil {
		return decoded{empty: true}, nil
	}
	_, hasKind := v["kind"]
	_, hasAPI := v["apiVersion"]
	_, hasData := v["data"]
	dec := decoded{marked: hasKind || hasAPI || hasData}
	b, err := json.Marshal(v)
	if err != nil {
		dec.err = err
		return dec, nil
	}
	if err := json.Unmarshal(b, &dec.obj); err != nil {
		dec.err = fmt.Errorf("not a Kubernetes object: %v", err)
		return dec, nil
	}
	raws := dec.obj.Items
	dec.obj.Items = nil
	if !strings.HasSuffix(dec.obj.Kind, "List") {
		return dec, nil
	}
	for k, raw := range raws {
		var item object
		if err := json.Unmarshal(raw, &item); err != nil {
			dec.err = fmt.Errorf("items[%d]: %v", k, err)
			return dec, nil
		}
		item.Items = nil
		dec.items = append(dec.items, item)
	}
	return dec, nil
}

// fastDoc reads a document decoded into ordered slices. ok is false for
// anything whose exact reading it does not vouch for: a key that is no
// string, a float (JSON has no NaN), a field of the object of the wrong
// type or named in another case (encoding/json folds case), text that is
// not UTF-8; and for every error, whose wording is the exact path's. A key
// given twice keeps its last value, as go.yaml's map does.
func fastDoc(ms yamlv2.MapSlice) (decoded, bool) {
	if !plain(ms) {
		return decoded{}, false
	}
	dec := decoded{}
	for _, it := range ms {
		switch it.Key {
		case "kind", "apiVersion", "data":
			dec.marked = true
		}
	}
	var ok bool
	if dec.obj, ok = fastObject(ms); !ok {
		return decoded{}, false
	}
	if !strings.HasSuffix(dec.obj.Kind, "List") {
		dec.obj.Items = nil
		return dec, true
	}
	items, _ := field(ms, "items")
	list, _ := items.([]any)
	for _, raw := range list {
		var item object
		if raw != nil {
			m, isMap := raw.(yamlv2.MapSlice)
			if !isMap {
				return decoded{}, false
			}
			if item, ok = fastObject(m); !ok {
				return decoded{}, false
			}
			item.Items = nil
		}
		dec.items = append(dec.items, item)
	}
	dec.obj.Items = nil
	return dec, true
}

// plain reports a tree of string keys and of values JSON holds as they
// are (no float).
func plain(v any) bool {
	switch v := v.(type) {
	case yamlv2.MapSlice:
		for _, it := range v {
			if _, ok := it.Key.(string); !ok || !plain(it.Value) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range v {
			if !plain(e) {
				return false
			}
		}
		return true
	case nil, string, bool, int, int64, uint64:
		return true
	}
	return false
}

// fastObject reads an object's fields from a plain mapping; ok is false
// where encoding/json would fail or fold case. Items is set non-nil when
// the field is a sequence, for the caller.
func fastObject(ms yamlv2.MapSlice) (object, bool) {
	var o object
	if !exactNames(ms, "kind", "metadata", "data", "items") {
		return o, false
	}
	kind, _ := field(ms, "kind")
	var ok bool
	if o.Kind, ok = str(kind); !ok {
		return o, false
	}
	if meta, _ := field(ms, "metadata"); meta != nil {
		m, isMap := meta.(yamlv2.MapSlice)
		if !isMap || !exactNames(m, "name", "namespace") {
			return o, false
		}
		name, _ := field(m, "name")
		ns, _ := field(m, "namespace")
		if o.Metadata.Name, ok = str(name); !ok {
			return o, false
		}
		if o.Metadata.Namespace, ok = str(ns); !ok {
			return o, false
		}
	}
	if data, present := field(ms, "data"); present && data != nil {
		m, isMap := data.(yamlv2.MapSlice)
		if !isMap {
			return o, false
		}
		o.Data = make(map[string]string, len(m))
		for _, it := range m {
			v, isStr := it.Value.(string)
			k := it.Key.(string)
			if !isStr || !utf8.ValidString(k) || !utf8.ValidString(v) {
				return o, false
			}
			o.Data[k] = v
		}
	}
	if items, _ := field(ms, "items"); items != nil {
		if _, isList := items.([]any); !isList {
			return o, false
		}
		o.Items = []json.RawMessage{}
	}
	return o, true
}

// exactNames reports that no key of m names one of fields in another
// case, which encoding/json would take for it.
func exactNames(m yamlv2.MapSlice, fields ...string) bool {
	for _, it := range m {
		k := it.Key.(string)
		for _, f := range fields {
			if k != f && strings.EqualFold(k, f) {
				return false
			}
		}
	}
	return true
}

// field is the value of key in m: its last, as in go.yaml's map.
func field(m yamlv2.MapSlice, key string) (v any, present bool) {
	for _, it := range m {
		if it.Key == key {
			v, present = it.Value, true
		}
	}
	return v, present
}

// str is a string field as encoding/json reads it: null is "".
func str(v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "", true
	case string:
		return v, utf8.ValidString(v)
	}
	return "", false
}
