package main

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// flagLayer binds a command's flags to the fields of its config type T.
// load layers them. A flag set on the command line wins over the config
// file. The file wins over the environment (StringEnv), and that over T's
// defaults. A flag that is not set never touches the config, so the
// default it shows must be the api's; each command's test checks that
// (checkFlagDefaults).
type flagLayer[T any] struct {
	fs    *flag.FlagSet
	binds []binding[T]
}

// binding is one flag bound to one field.
type binding[T any] struct {
	name  string   // the flag
	field string   // the field's path in the file: "clusterDNS", "cluster.clusterDomain"
	apply func(*T) // copies the flag's value into the field
	env   func(*T) // when not nil, fills the field from the environment
}

func newFlagLayer[T any](fs *flag.FlagSet) *flagLayer[T] {
	return &flagLayer[T]{fs: fs}
}

func (l *flagLayer[T]) bind(name, field string, apply func(*T)) {
	l.binds = append(l.binds, binding[T]{name: name, field: field, apply: apply})
}

// String binds a string flag to the field.
func (l *flagLayer[T]) String(field func(*T) *string, name, def, usage string) {
	v := l.fs.String(name, def, usage)
	l.bind(name, fieldPath(field), func(c *T) { *field(c) = *v })
}

// StringEnv binds a string flag to the field; after the flags, $env fills
// the field when it is still empty.
func (l *flagLayer[T]) StringEnv(field func(*T) *string, name, env, usage string) {
	l.String(field, name, "", usage)
	l.binds[len(l.binds)-1].env = func(c *T) {
		if p := field(c); *p == "" {
			*p = os.Getenv(env)
		}
	}
}

// StringPtr binds a string flag to an optional field: set, even to "", the
// flag sets the field.
func (l *flagLayer[T]) StringPtr(field func(*T) **string, name, def, usage string) {
	v := l.fs.String(name, def, usage)
	l.bind(name, fieldPath(field), func(c *T) { s := *v; *field(c) = &s })
}

// List binds a flag of comma-separated values to a list field; "" is the
// empty list.
func (l *flagLayer[T]) List(field func(*T) *[]string, name, def, usage string) {
	v := l.fs.String(name, def, usage)
	l.bind(name, fieldPath(field), func(c *T) { *field(c) = splitList(*v) })
}

// Int binds an int flag to the field.
func (l *flagLayer[T]) Int(field func(*T) *int, name string, def int, usage string) {
	v := l.fs.Int(name, def, usage)
	l.bind(name, fieldPath(field), func(c *T) { *field(c) = *v })
}

// IntPtr binds an int flag without a default to an optional field.
func (l *flagLayer[T]) IntPtr(field func(*T) **int, name, usage string) {
	v := &optionalInt{}
	l.fs.Var(v, name, usage)
	l.bind(name, fieldPath(field), func(c *T) { *field(c) = v.v })
}

// Bool binds a bool flag to the field.
func (l *flagLayer[T]) Bool(field func(*T) *bool, name string, def bool, usage string) {
	v := l.fs.Bool(name, def, usage)
	l.bind(name, fieldPath(field), func(c *T) { *field(c) = *v })
}

// BoolPtr binds a bool flag to an optional field.
func (l *flagLayer[T]) BoolPtr(field func(*T) **bool, name string, def bool, usage string) {
	v := l.fs.Bool(name, def, usage)
	l.bind(name, fieldPath(field), func(c *T) { b := *v; *field(c) = &b })
}

// Duration binds a duration flag to a duration field.
func (l *flagLayer[T]) Duration(field func(*T) *v1alpha1.Duration, name string, def v1alpha1.Duration, usage string) {
	v := l.fs.Duration(name, def.Duration(), usage)
	l.bind(name, fieldPath(field), func(c *T) { *field(c) = v1alpha1.Duration(v.String()) })
}

// Defined binds a flag already defined on the set (fs.Uint, fs.Bool, ...)
// whose value needs converting: apply copies it into the config when it
// is set. field is as for Var.
func (l *flagLayer[T]) Defined(name, field string, apply func(*T)) {
	if l.fs.Lookup(name) == nil {
		panic("flagLayer: no flag " + name)
	}
	l.bind(name, field, apply)
}

// Var binds a flag of any kind: apply copies its value into the config
// when it is set. field is the config path it fills, for named; a flag
// that fills several fields names the first.
func (l *flagLayer[T]) Var(v flag.Value, name, field, usage string, apply func(*T)) {
	l.fs.Var(v, name, usage)
	l.bind(name, field, apply)
}

// load fills cfg in layers: the file at path, if any (read strictly,
// checked for kind, defaulted and validated on its own), then the flags
// set on the command line, then the environment, then the defaults. The
// result is validated; with a file, its error says so. An error of the
// result is a usageError; one of the file alone is not.
func (l *flagLayer[T]) load(path, kind string, cfg *T) error {
	c, ok := any(cfg).(interface {
		SetDefaults()
		Validate() error
	})
	if !ok {
		panic(fmt.Sprintf("flagLayer: %T has no SetDefaults and Validate", cfg))
	}
	if path != "" {
		f, ok := c.(configFile)
		if !ok {
			panic(fmt.Sprintf("flagLayer: %T is not a config file", cfg))
		}
		if err := loadConfig(path, kind, f); err != nil {
			return err
		}
	}
	set := map[string]bool{}
	l.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, b := range l.binds {
		if set[b.name] {
			b.apply(cfg)
		}
	}
	for _, b := range l.binds {
		if b.env != nil {
			b.env(cfg)
		}
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		if path != "" {
			err = fmt.Errorf("config %q with flags: %w", path, err)
		}
		return usageError{err}
	}
	return nil
}

// named names the flag of the field a validation error starts with:
// "clusterDNS[1]: ..." becomes "--cluster-dns (clusterDNS[1]): ...".
// Other errors are returned as they are. The result wraps err.
func (l *flagLayer[T]) named(err error) error {
	msg := err.Error()
	set := map[string]bool{}
	if l.fs != nil {
		l.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	}
	// A flag given on the command line names the field first: --forward,
	// not --upstream, for a forward error when --forward was given.
	for _, given := range []bool{true, false} {
		for _, b := range l.binds {
			if set[b.name] == given && (strings.HasPrefix(msg, b.field+":") || strings.HasPrefix(msg, b.field+"[")) {
				return namedError{"--" + b.name + " (" + strings.Replace(msg, ":", "):", 1), err}
			}
		}
	}
	return err
}

// namedError is an error renamed by named.
type namedError struct {
	msg string
	err error
}

func (e namedError) Error() string { return e.msg }
func (e namedError) Unwrap() error { return e.err }

// fieldPath is the path, by JSON names, of the field that field returns
// in a T: "listen", or "cluster.clusterDomain" in a nested struct.
// Inline (embedded) structs add nothing to the path.
func fieldPath[T, F any](field func(*T) *F) string {
	var probe T
	addr := reflect.ValueOf(field(&probe)).Pointer()
	path, ok := findField(reflect.ValueOf(&probe).Elem(), addr, reflect.TypeFor[F](), "")
	if !ok {
		panic(fmt.Sprintf("flagLayer: the accessor does not return a field of %T", probe))
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
