package main

import (
	"errors"
	"flag"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// checkFlagDefaults: each flag set to the default it shows gives the
// config the layer gives without it, base with the api defaults. A flag
// whose default is not the api's fails here.
func checkFlagDefaults[T any](t *testing.T, register func(*flag.FlagSet) *flagLayer[T], base T) {
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
		if err := l.load("", "", &cfg); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return cfg
	}
	t.Setenv("NODE_NAME", "")
	def := load()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	for _, b := range register(fs).binds {
		f := fs.Lookup(b.name)
		if _, unset := f.Value.(*optionalInt); unset && f.DefValue == "" {
			continue // no default: the engine's (kubelet's ndots:5)
		}
		if f.DefValue == "" && f.Value.Set("") != nil {
			continue // no default to show: a repeatable flag such as --forward
		}
		if got := load("--" + b.name + "=" + f.DefValue); !reflect.DeepEqual(got, def) {
			t.Errorf("--%s %q (%s): %+v, without it %+v", b.name, f.DefValue, b.field, got, def)
		}
	}
}

func TestFlagDefaultsAreTheAPIs(t *testing.T) {
	t.Run("shim", func(t *testing.T) { checkFlagDefaults(t, shimFlags, shimConfig{}) })
	t.Run("nri", func(t *testing.T) { checkFlagDefaults(t, nriFlags, nriConfig{}) })
	t.Run("serve", func(t *testing.T) { checkFlagDefaults(t, serveFlags, serverConfig{}) })
	t.Run("webhook", func(t *testing.T) {
		checkFlagDefaults(t, func(fs *flag.FlagSet) *flagLayer[webhookConfig] {
			var f webhookFlags
			f.register(fs)
			return f.layer
		}, webhookConfig{})
	})
	t.Run("render", func(t *testing.T) {
		checkFlagDefaults(t, func(fs *flag.FlagSet) *flagLayer[nodeConfig] {
			var n nodeFlags
			n.register(fs)
			return n.layer
		}, nodeConfig{NodeDNS: v1alpha1.NodeDNS{ClusterDNS: []string{v1alpha1.DefaultRenderClusterDNS}}})
	})
}

// TestFieldPath: a flag's field is named by its path in the config file.
func TestFieldPath(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{fieldPath(func(c *shimConfig) *string { return &c.Listen }), "listen"},
		{fieldPath(func(c *shimConfig) *[]string { return &c.ClusterDNS }), "clusterDNS"},
		{fieldPath(func(c *shimConfig) **string { return &c.ClusterDomain }), "clusterDomain"},
		{fieldPath(func(c *shimConfig) **int { return &c.Ndots }), "ndots"},
		{fieldPath(func(c *shimConfig) *string { return &c.APIVersion }), "apiVersion"},
		{fieldPath(func(c *webhookConfig) **string { return &c.Cluster.ClusterDomain }), "cluster.clusterDomain"},
		{fieldPath(func(c *webhookConfig) *[]string { return &c.Cluster.ClusterDNS }), "cluster.clusterDNS"},
		{fieldPath(func(c *nodeConfig) *[]string { return &c.NodeIPs }), "nodeIPs"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("fieldPath = %q, want %q", tt.got, tt.want)
		}
	}
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
			err := l.load(tt.config, v1alpha1.ShimKind, cfg)
			if err != nil {
				err = l.named(err)
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
	if err := errors.New("other"); newFlagLayer[shimConfig](nil).named(err) != err {
		t.Error("named changed an error that names no field")
	}
}

// routesConfig is a config whose field a repeatable flag fills.
type routesConfig struct {
	Routes []string `json:"routes"`
}

func (c *routesConfig) SetDefaults() {
	if c.Routes == nil {
		c.Routes = []string{"default"}
	}
}

func (c *routesConfig) Validate() error {
	if slices.Contains(c.Routes, "bad") {
		return errors.New(`routes[0]: "bad" is not a route`)
	}
	return nil
}

// repeatFlag is a flag.Value that collects each value it is given.
type repeatFlag []string

func (r *repeatFlag) String() string { return strings.Join(*r, ",") }

func (r *repeatFlag) Set(v string) error { *r = append(*r, v); return nil }

// TestFlagLayerVar: a flag of any kind layers like the others, and
// errors name it.
func TestFlagLayerVar(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    []string
		wantErr string
	}{
		{nil, []string{"default"}, ""},
		{[]string{"--route", "a", "--route", "b"}, []string{"a", "b"}, ""},
		{[]string{"--route", "bad"}, nil, `--route (routes[0]): "bad" is not a route`},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		l := newFlagLayer[routesConfig](fs)
		var routes repeatFlag
		l.Var(&routes, "route", "routes", "a route; repeatable", func(c *routesConfig) { c.Routes = routes })
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		var cfg routesConfig
		err := l.load("", "", &cfg)
		if err != nil {
			err = l.named(err)
		}
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(cfg.Routes, tc.want) {
			t.Errorf("%q: routes %q (%v), want %q", tc.args, cfg.Routes, err, tc.want)
		}
	}
}
