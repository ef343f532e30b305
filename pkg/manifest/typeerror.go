package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode"
)

// TypeError turns err, a JSON type error from decoding js, into a
// problem at the field's full path in js, with list indexes:
// "spec.dnsConfig.options[0].value" where encoding/json says
// "spec.dnsConfig.options.value". The API server refuses such an object
// whole, as it decodes it the same way. False for any other error.
func TypeError(js []byte, err error) (*FieldError, bool) {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Field == "" {
		return nil, false
	}
	got, _, _ := strings.Cut(te.Value, " ") // "number", "number 1e400"
	path, lit, ok := findValue(js, te.Field, got)
	if !ok {
		// An embedded struct adds its Go name ("spec.Spec.dnsConfig").
		path, lit, ok = findValue(js, JSONKeys(te.Field), got)
	}
	if !ok {
		path, lit = JSONKeys(te.Field), got
	}
	msg := fmt.Sprintf("Invalid value: %s: must be %s, not %s: the API server refuses the object", lit, typeName(te.Type), article(got))
	if te.Type != nil && te.Type.Kind() == reflect.String && (got == "number" || got == "bool") {
		msg += fmt.Sprintf(" (quote it: %q; helm --set-string keeps it a string)", lit)
	}
	return &FieldError{Field: path, Message: msg}, true
}

// JSONKeys drops the Go names of embedded structs from a field path of
// encoding/json ("spec.Spec.dnsConfig", "cache.CacheTTLs.maxTTL").
func JSONKeys(field string) string {
	var keep []string
	for _, k := range strings.Split(field, ".") {
		if k != "" && !unicode.IsUpper(rune(k[0])) {
			keep = append(keep, k)
		}
	}
	return strings.Join(keep, ".")
}

// typeName is a Go type as a manifest author reads it.
func typeName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "a mapping"
	}
	return t.String()
}

// article names a JSON value kind as encoding/json words it.
func article(kind string) string {
	switch kind {
	case "object":
		return "a mapping"
	case "array":
		return "a list"
	case "bool":
		return "true or false"
	}
	return "a " + kind
}

// findValue walks js for the first value of JSON kind at a path that,
// without list indexes, is field or ends in "."+field. It returns the
// path with indexes and the value as written (its kind for a mapping or
// a list). encoding/json names a list's element by the list's field, so
// a matching list whose element matches too yields the element.
func findValue(js []byte, field, kind string) (path, lit string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	type frame struct {
		array bool
		key   string
		index int
	}
	var stack []frame
	var cand struct{ path, lit string }
	candDepth := -1
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", "", false
		}
		if d, isDelim := tok.(json.Delim); isDelim && (d == '}' || d == ']') {
			if len(stack) == candDepth {
				return cand.path, cand.lit, true
			}
			stack = stack[:len(stack)-1]
			expectKey = len(stack) > 0 && !stack[len(stack)-1].array
			continue
		}
		if expectKey {
			stack[len(stack)-1].key = tok.(string)
			expectKey = false
			continue
		}
		// tok is a value at the path the stack names.
		if n := len(stack); n > 0 && stack[n-1].array {
			stack[n-1].index++
		}
		var full, bare strings.Builder
		for i, f := range stack {
			switch {
			case f.array:
				fmt.Fprintf(&full, "[%d]", f.index)
			default:
				if i > 0 {
					full.WriteByte('.')
					bare.WriteByte('.')
				}
				full.WriteString(f.key)
				bare.WriteString(f.key)
			}
		}
		b := bare.String()
		if valueKind(tok) == kind && (b == field || strings.HasSuffix(b, "."+field)) {
			if kind != "array" {
				return full.String(), literal(tok), true
			}
			cand.path, cand.lit, candDepth = full.String(), literal(tok), len(stack)+1
		}
		if d, isDelim := tok.(json.Delim); isDelim {
			stack = append(stack, frame{array: d == '[', index: -1})
			expectKey = d == '{'
		} else {
			expectKey = len(stack) > 0 && !stack[len(stack)-1].array
		}
	}
}

// valueKind is a token's kind as encoding/json's type errors name it.
func valueKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "array"
		}
		return "object"
	case bool:
		return "bool"
	case json.Number:
		return "number"
	case string:
		return "string"
	}
	return "null"
}

func literal(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		return valueKind(v)
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case string:
		return strconv.Quote(v)
	}
	return "null"
}
