package main

import (
	"errors"
	"flag"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
)

// checkFlagDefaults: each flag set to the default it shows gives the
// config the layer gives without it, base with the api defaults. A flag
// whose default is not the api's fails here.
func checkFlagDefaults[T any](t *testing.T, register func(*flag.FlagSet) *flaglayer.Layer[T], base T) {
	t.Helper()
	load := func(args ...string) T {
		t.Helper()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		l := register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		cfg := base
		if err := l.Load("", "", &cfg); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return cfg
	}
	t.Setenv("NODE_NAME", "")
	def := load()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	for _, b := range register(fs).Bindings() {
		f := fs.Lookup(b.Flag)
		if _, unset := f.Value.(*flaglayer.OptionalInt); unset && f.DefValue == "" {
			continue // no default: the engine's (kubelet's ndots:5)
		}
		if f.DefValue == "" && f.Value.Set("") != nil {
			continue // no default to show: a repeatable flag such as --forward
		}
		if got := load("--" + b.Flag + "=" + f.DefValue); !reflect.DeepEqual(got, def) {
			t.Errorf("--%s %q (%s): %+v, without it %+v", b.Flag, f.DefValue, b.Field, got, def)
		}
	}
}

func TestFlagDefaultsAreTheAPIs(t *testing.T) {
	t.Run("shim", func(t *testing.T) { checkFlagDefaults(t, shimFlags, shimConfig{}) })
	t.Run("nri", func(t *testing.T) { checkFlagDefaults(t, nriFlags, nriConfig{}) })
	t.Run("serve", func(t *testing.T) { checkFlagDefaults(t, serveFlags, serverConfig{}) })
	t.Run("webhook", func(t *testing.T) {
		checkFlagDefaults(t, func(fs *flag.FlagSet) *flaglayer.Layer[webhookConfig] {
			var f webhookFlags
			f.register(fs)
			return f.layer
		}, webhookConfig{})
	})
	t.Run("render", func(t *testing.T) {
		checkFlagDefaults(t, func(fs *flag.FlagSet) *flaglayer.Layer[nodeConfig] {
			var n nodeFlags
			n.register(fs)
			return n.layer
		}, nodeConfig{NodeDNS: v1alpha1.NodeDNS{ClusterDNS: []string{v1alpha1.DefaultRenderClusterDNS}}})
	})
}

// TestFlagLayer: a flag set on the command line wins over the file, the
// file over the environment, and that over the defaults; errors name the
// flag, or the file.
func TestFlagLayer(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, filepath.Join(dir, "shim.yaml"), "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ShimConfiguration\n"+
		"limits: reject\nnodeName: from-file\nclusterDomain: file.example\n")
	tests := []struct {
		name    string
		env     string
		config  string
		args    []string
		check   func(*shimConfig) bool
		wantErr string
	}{
		{"defaults", "", "", nil, func(c *shimConfig) bool {
			return c.Limits == v1alpha1.DefaultLimits && c.NodeName == "" && c.Domain() == v1alpha1.DefaultClusterDomain
		}, ""},
		{"environment", "from-env", "", nil, func(c *shimConfig) bool { return c.NodeName == "from-env" }, ""},
		{"flag over environment", "from-env", "", []string{"--node-name", "from-flag"}, func(c *shimConfig) bool { return c.NodeName == "from-flag" }, ""},
		{"file over environment and defaults", "from-env", file, nil, func(c *shimConfig) bool {
			return c.NodeName == "from-file" && c.Limits == v1alpha1.LimitsReject && c.Domain() == "file.example"
		}, ""},
		{"flags over file", "", file, []string{"--limits", "trim", "--cluster-domain", ""}, func(c *shimConfig) bool {
			return c.Limits == v1alpha1.LimitsTrim && c.Domain() == "" && c.NodeName == "from-file"
		}, ""},
		{"flag error names the flag", "", "", []string{"--cluster-dns", "10.96.0.10,x"}, nil, `--cluster-dns (clusterDNS[1]): "x" is not an IP address`},
		{"error with a file names it", "", file, []string{"--limits", "cut"}, nil, `config "` + file + `" with flags: limits: "cut" must be`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NODE_NAME", tt.env)
			fs := flag.NewFlagSet("shim", flag.ContinueOnError)
			l := shimFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			cfg := &shimConfig{}
			err := l.Load(tt.config, v1alpha1.ShimKind, cfg)
			if err != nil {
				err = l.Named(err)
			}
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Errorf("error %v, want one starting %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case !tt.check(cfg):
				t.Errorf("config %+v", cfg)
			}
		})
	}
	if err := errors.New("other"); flaglayer.New[shimConfig](nil).Named(err) != err {
		t.Error("named changed an error that names no field")
	}
}
