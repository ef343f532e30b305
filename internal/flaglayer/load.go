package flaglayer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/corefile"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/manifest"
)

// MaxFileBytes bounds a config file; a complete one is a few KiB.
const MaxFileBytes = 1 << 20

// Config is what Load needs of a config type: its defaults and its
// validation, from api/v1alpha1.
type Config interface {
	SetDefaults()
	Validate() error
}

// File is a versioned config type from api/v1alpha1.
type File interface {
	Config
	CheckKind(kind string) error
}

// ReadFile reads a YAML or JSON config file strictly (unknown fields are
// errors) into cfg, checks apiVersion and kind, applies defaults and
// validates. Errors name the file and the field.
func ReadFile(path, kind string, cfg File) error {
	data, err := safefile.ReadNamed(path, MaxFileBytes)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fmt.Errorf("config %q is empty", path)
	}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		if werr := wrongFile(path, kind, data); werr != nil {
			return werr
		}
		msg := err.Error()
		if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) && te.Field != "" {
			// The field as the file names it, without embedded Go names.
			msg = strings.Replace(msg, te.Field, manifest.JSONKeys(te.Field), 1)
		}
		return fmt.Errorf("config %q: %s", path, msg)
	}
	if err := cfg.CheckKind(kind); err != nil {
		return fmt.Errorf("config %q: %w", path, err)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config %q: %w", path, err)
	}
	return nil
}

// WrongFileError is a config file that holds a DNS configuration of
// another program, which convert reads (a Corefile, a coredns ConfigMap):
// the wrong file on the command line.
type WrongFileError struct{ Err error }

func (e WrongFileError) Error() string { return e.Err.Error() }
func (e WrongFileError) Unwrap() error { return e.Err }

// others say what each form convert reads is.
var others = map[corefile.Form]string{
	corefile.FormCorefile:  "a Corefile (a CoreDNS configuration)",
	corefile.FormCoreDNS:   "a coredns ConfigMap (its data.Corefile is a CoreDNS configuration)",
	corefile.FormNodeLocal: "a NodeLocal DNSCache ConfigMap (its data.Corefile is a CoreDNS configuration)",
	corefile.FormKubeDNS:   "a kube-dns ConfigMap (a kube-dns configuration)",
}

// wrongFile is a WrongFileError when data, which does not decode as kind,
// is what convert reads, with the command that converts it; else nil.
func wrongFile(path, kind string, data []byte) error {
	form := corefile.Recognize(context.Background(), path, data)
	if form == "" {
		return nil
	}
	err := fmt.Errorf("--config %s: this is %s, not a %s", path, others[form], kind)
	switch {
	case kind != v1alpha1.ServerKind:
	case form == corefile.FormCorefile || form == corefile.FormNodeLocal:
		err = fmt.Errorf("%w: run `dnsconfigurer convert %s > config.yaml` first (docs/convert.md)", err, path)
	default:
		err = fmt.Errorf("%w: run `dnsconfigurer convert %s > config.yaml` first, "+
			"or `dnsconfigurer convert --configmap dnsconfigurer-dns %s` for the ConfigMap deploy/ mounts (docs/convert.md)", err, path, path)
	}
	return WrongFileError{err}
}

// InvalidError is a config that the flags make invalid: a problem with
// the command line. An error of the file alone is not one.
type InvalidError struct{ Err error }

func (e InvalidError) Error() string { return e.Err.Error() }
func (e InvalidError) Unwrap() error { return e.Err }

// Load fills cfg in layers: the file at path, if any (read by ReadFile,
// on its own), then the flags set on the command line, then the
// environment, then the defaults. The result is validated; with a file,
// its error says so, and it is an InvalidError.
func (l *Layer[T]) Load(path, kind string, cfg *T) error {
	c, ok := any(cfg).(Config)
	if !ok {
		panic(fmt.Sprintf("flaglayer: %T has no SetDefaults and Validate", cfg))
	}
	if path != "" {
		f, ok := c.(File)
		if !ok {
			panic(fmt.Sprintf("flaglayer: %T is not a config file", cfg))
		}
		if err := ReadFile(path, kind, f); err != nil {
			return err
		}
	}
	set := l.set()
	for _, b := range l.binds {
		if set[b.Flag] {
			b.apply(cfg)
		}
	}
	for _, env := range l.env {
		env(cfg)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		if path != "" {
			err = fmt.Errorf("config %q with flags: %w", path, err)
		}
		return InvalidError{err}
	}
	return nil
}

// set is the flags given on the command line.
func (l *Layer[T]) set() map[string]bool {
	set := map[string]bool{}
	if l.fs != nil {
		l.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	}
	return set
}

// Named names the flag of the field a validation error starts with:
// "clusterDNS[1]: ..." becomes "--cluster-dns (clusterDNS[1]): ...".
// Other errors are returned as they are. The result wraps err.
func (l *Layer[T]) Named(err error) error {
	msg := err.Error()
	set := l.set()
	// A flag given on the command line names the field first: --forward,
	// not --upstream, for a forward error when --forward was given.
	for _, given := range []bool{true, false} {
		for _, b := range l.binds {
			if set[b.Flag] == given && (strings.HasPrefix(msg, b.Field+":") || strings.HasPrefix(msg, b.Field+"[")) {
				return namedError{"--" + b.Flag + " (" + strings.Replace(msg, ":", "):", 1), err}
			}
		}
	}
	return err
}

// namedError is an error renamed by Named.
type namedError struct {
	msg string
	err error
}

func (e namedError) Error() string { return e.msg }
func (e namedError) Unwrap() error { return e.err }
