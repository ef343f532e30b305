package flaglayer

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// Layer binds a command's flags to the fields of its config type T.
type Layer[T any] struct {
	fs    *flag.FlagSet
	binds []bound[T]
	env   []func(*T) // fill fields from the environment, after the flags
}

// Binding is one flag bound to one field.
type Binding struct {
	Flag  string // the flag's name
	Field string // the field's path in the file: "clusterDNS", "cluster.clusterDomain"
}

// New is a Layer over the flags of fs.
func New[T any](fs *flag.FlagSet) *Layer[T] {
	return &Layer[T]{fs: fs}
}

// FlagSet is the set the flags are defined on.
func (l *Layer[T]) FlagSet() *flag.FlagSet { return l.fs }

// Bindings lists the bound flags in the order they were bound.
func (l *Layer[T]) Bindings() []Binding {
	out := make([]Binding, len(l.binds))
	for i, b := range l.binds {
		out[i] = b.Binding
	}
	return out
}

// bound is a Binding with what copies the flag's value into the config.
type bound[T any] struct {
	Binding
	apply func(*T)
}

func (l *Layer[T]) bind(name, field string, apply func(*T)) {
	l.binds = append(l.binds, bound[T]{Binding{Flag: name, Field: field}, apply})
}

// String binds a string flag to the field.
func (l *Layer[T]) String(field func(*T) *string, name, def, usage string) {
	Text(l, field, name, def, usage)
}

// Text binds a string flag to a field of a string type. The value is kept
// as written, so that the config's validation names a bad one.
func Text[T any, F ~string](l *Layer[T], field func(*T) *F, name, def, usage string) {
	v := l.fs.String(name, def, usage)
	l.bind(name, FieldPath(field), func(c *T) { *field(c) = F(*v) })
}

// StringEnv binds a string flag to the field; after the flags, $env fills
// the field when it is still empty.
func (l *Layer[T]) StringEnv(field func(*T) *string, name, env, usage string) {
	l.String(field, name, "", usage)
	l.env = append(l.env, func(c *T) {
		if p := field(c); *p == "" {
			*p = os.Getenv(env)
		}
	})
}

// StringPtr binds a string flag to an optional field: set, even to "", the
// flag sets the field.
func (l *Layer[T]) StringPtr(field func(*T) **string, name, def, usage string) {
	v := l.fs.String(name, def, usage)
	l.bind(name, FieldPath(field), func(c *T) { s := *v; *field(c) = &s })
}

// List binds a flag of comma-separated values to a list field; "" is the
// empty list.
func (l *Layer[T]) List(field func(*T) *[]string, name, def, usage string) {
	v := l.fs.String(name, def, usage)
	l.bind(name, FieldPath(field), func(c *T) { *field(c) = SplitList(*v) })
}

// Repeated binds a repeatable flag to a list field. Each value given may
// hold several, comma-separated; together they make the list.
func (l *Layer[T]) Repeated(field func(*T) *[]string, name, usage string) {
	var v ListValue
	l.Var(&v, name, FieldPath(field), usage, func(c *T) { *field(c) = slices.Clone(v) })
}

// Int binds an int flag to the field.
func (l *Layer[T]) Int(field func(*T) *int, name string, def int, usage string) {
	v := l.fs.Int(name, def, usage)
	l.bind(name, FieldPath(field), func(c *T) { *field(c) = *v })
}

// IntPtr binds an int flag without a default to an optional field.
func (l *Layer[T]) IntPtr(field func(*T) **int, name, usage string) {
	v := &OptionalInt{}
	l.fs.Var(v, name, usage)
	l.bind(name, FieldPath(field), func(c *T) { *field(c) = v.V })
}

// Bool binds a bool flag to the field.
func (l *Layer[T]) Bool(field func(*T) *bool, name string, def bool, usage string) {
	v := l.fs.Bool(name, def, usage)
	l.bind(name, FieldPath(field), func(c *T) { *field(c) = *v })
}

// BoolPtr binds a bool flag to an optional field.
func (l *Layer[T]) BoolPtr(field func(*T) **bool, name string, def bool, usage string) {
	v := l.fs.Bool(name, def, usage)
	l.bind(name, FieldPath(field), func(c *T) { b := *v; *field(c) = &b })
}

// Duration binds a duration flag to a duration field.
func (l *Layer[T]) Duration(field func(*T) *v1alpha1.Duration, name string, def v1alpha1.Duration, usage string) {
	v := l.fs.Duration(name, def.Duration(), usage)
	l.bind(name, FieldPath(field), func(c *T) { *field(c) = v1alpha1.Duration(v.String()) })
}

// Defined binds a flag already defined on the set (fs.Uint, fs.Bool, ...)
// whose value needs converting: apply copies it into the config when it
// is set. field is as for Var.
func (l *Layer[T]) Defined(name, field string, apply func(*T)) {
	if l.fs.Lookup(name) == nil {
		panic("flaglayer: no flag " + name)
	}
	l.bind(name, field, apply)
}

// Var binds a flag of any kind: apply copies its value into the config
// when it is set. field is the config path it fills, for Named. A flag
// that fills several fields names the first.
func (l *Layer[T]) Var(v flag.Value, name, field, usage string, apply func(*T)) {
	l.fs.Var(v, name, usage)
	l.bind(name, field, apply)
}

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ListValue is a repeatable flag whose values may hold several,
// comma-separated (SplitList).
type ListValue []string

func (l *ListValue) String() string { return strings.Join(*l, ",") }

// Set adds the items of v.
func (l *ListValue) Set(v string) error {
	*l = append(*l, SplitList(v)...)
	return nil
}

// OptionalInt is an int flag that may stay unset (V nil).
type OptionalInt struct{ V *int }

func (o *OptionalInt) String() string {
	if o == nil || o.V == nil {
		return ""
	}
	return strconv.Itoa(*o.V)
}

// Set parses s as a decimal int.
func (o *OptionalInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not a number", s)
	}
	o.V = &n
	return nil
}
