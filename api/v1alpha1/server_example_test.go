package v1alpha1

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// exampleValues are the fields of server.go's example whose value is not
// a default: fields without a default, or whose default is off or empty.
// A route's zone and upstreams have none: they are required in a route.
var exampleValues = map[string]bool{
	"apiVersion": true, "kind": true, "listen": true, "metricsListen": true, "kubeconfig": true, "namespaces": true,
	"forward.0.except": true, "forward.1.zone": true, "forward.1.upstreams": true, "forward.1.policy": true,
	"hosts.file": true, "overrides": true, "reverseZones": true, "rewrites": true,
	"reusePort": true, "cache.serveStale": true, "cache.prefetch.amount": true,
	"forward.0.zone": true, "forward.0.upstreams": true,
}

// TestServerExampleDefaults: each field of server.go's example holds its
// default, unless exampleValues names it. A field's default is what
// SetDefaults gives with that field removed, so the example cannot drift.
func TestServerExampleDefaults(t *testing.T) {
	golden, err := os.ReadFile("testdata/server-full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	example := toTree(t, golden)
	for _, path := range leaves(example, "") {
		t.Run(path, func(t *testing.T) {
			without := toTree(t, golden)
			deleteAt(without, path)
			data, err := json.Marshal(without)
			if err != nil {
				t.Fatal(err)
			}
			var c ServerConfiguration
			if err := yaml.UnmarshalStrict(data, &c); err != nil {
				t.Fatal(err)
			}
			c.SetDefaults()
			def, ok := lookup(toTree(t, mustJSON(t, &c)), path)
			got, _ := lookup(example, path)
			switch {
			case exampleValues[path] && ok && same(got, def):
				t.Errorf("%s: %v is the default; remove it from exampleValues", path, got)
			case exampleValues[path]:
			case !ok && !isZero(got):
				t.Errorf("%s: %v, but the default is unset; spell the default out, or add it to exampleValues", path, got)
			case ok && !same(got, def):
				t.Errorf("%s: the example says %v, the default is %v", path, got, def)
			}
		})
	}
}

// same compares two values of the tree; durations by length ("1h" is
// "3600s").
func same(a, b any) bool {
	as, aok := a.(string)
	bs, bok := b.(string)
	if aok && bok {
		ad, aerr := time.ParseDuration(as)
		bd, berr := time.ParseDuration(bs)
		if aerr == nil && berr == nil {
			return ad == bd
		}
	}
	return reflect.DeepEqual(a, b)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// toTree decodes YAML or JSON into maps, lists and scalars.
func toTree(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// leaves lists the paths of a tree's scalars and scalar lists
// ("cache.maxTTL", "forward.1.policy", "listen").
func leaves(v any, prefix string) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			out = append(out, leaves(c, join(prefix, k))...)
		}
	case []any:
		if len(v) > 0 {
			if _, ok := v[0].(map[string]any); ok && prefix != "overrides" && prefix != "rewrites" {
				for i, c := range v {
					out = append(out, leaves(c, join(prefix, fmt.Sprint(i)))...)
				}
				break
			}
		}
		out = append(out, prefix)
	default:
		out = append(out, prefix)
	}
	sort.Strings(out)
	return out
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

func step(v any, k string) (any, bool) {
	switch v := v.(type) {
	case map[string]any:
		c, ok := v[k]
		return c, ok
	case []any:
		var i int
		if _, err := fmt.Sscan(k, &i); err != nil || i >= len(v) {
			return nil, false
		}
		return v[i], true
	}
	return nil, false
}

func lookup(v any, path string) (any, bool) {
	for _, k := range splitPath(path) {
		var ok bool
		if v, ok = step(v, k); !ok {
			return nil, false
		}
	}
	return v, true
}

func deleteAt(m map[string]any, path string) {
	keys := splitPath(path)
	parent, ok := lookup(m, joinPath(keys[:len(keys)-1]))
	if len(keys) == 1 {
		parent, ok = m, true
	}
	if p, isMap := parent.(map[string]any); ok && isMap {
		delete(p, keys[len(keys)-1])
	}
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return out
}

func joinPath(keys []string) string {
	out := ""
	for _, k := range keys {
		out = join(out, k)
	}
	return out
}

func isZero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case float64:
		return v == 0
	case string:
		return v == "" || v == "0s"
	case []any:
		return len(v) == 0
	}
	return false
}
