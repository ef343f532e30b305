package flaglayer

import (
	"fmt"
	"reflect"
	"strings"
)

// FieldPath is the path, by JSON names, of the field that field returns
// in a T: "listen", or "cluster.clusterDomain" in a nested struct.
// Inline (embedded) structs add nothing to the path.
func FieldPath[T, F any](field func(*T) *F) string {
	var probe T
	addr := reflect.ValueOf(field(&probe)).Pointer()
	path, ok := findField(reflect.ValueOf(&probe).Elem(), addr, reflect.TypeFor[F](), "")
	if !ok {
		panic(fmt.Sprintf("flaglayer: the accessor does not return a field of %T", probe))
	}
	return path
}

// findField searches the struct v for the field at addr of type t.
func findField(v reflect.Value, addr uintptr, t reflect.Type, prefix string) (string, bool) {
	for i := range v.NumField() {
		sf, fv := v.Type().Field(i), v.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if fv.Addr().Pointer() == addr && sf.Type == t {
			return prefix + name, true
		}
		if sf.Type.Kind() != reflect.Struct {
			continue
		}
		sub := prefix
		if !sf.Anonymous || name != "" {
			sub = prefix + name + "."
		}
		if path, ok := findField(fv, addr, t, sub); ok {
			return path, true
		}
	}
	return "", false
}
