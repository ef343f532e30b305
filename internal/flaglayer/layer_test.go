package flaglayer_test

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
)

// TestFieldPath: a flag's field is named by its path in the config file.
func TestFieldPath(t *testing.T) {
	type shim = v1alpha1.ShimConfiguration
	type webhook = v1alpha1.WebhookConfiguration
	tests := []struct {
		got, want string
	}{
		{flaglayer.FieldPath(func(c *shim) *string { return &c.Listen }), "listen"},
		{flaglayer.FieldPath(func(c *shim) *[]string { return &c.ClusterDNS }), "clusterDNS"},
		{flaglayer.FieldPath(func(c *shim) **string { return &c.ClusterDomain }), "clusterDomain"},
		{flaglayer.FieldPath(func(c *shim) **int { return &c.Ndots }), "ndots"},
		{flaglayer.FieldPath(func(c *shim) *string { return &c.APIVersion }), "apiVersion"},
		{flaglayer.FieldPath(func(c *webhook) **string { return &c.Cluster.ClusterDomain }), "cluster.clusterDomain"},
		{flaglayer.FieldPath(func(c *webhook) *[]string { return &c.Cluster.ClusterDNS }), "cluster.clusterDNS"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("FieldPath = %q, want %q", tt.got, tt.want)
		}
	}
}

// routesConfig is a config whose field a repeatable flag fills.
type routesConfig struct {
	Routes []string `json:"routes"`
	Name   string   `json:"name"`
	Count  *int     `json:"count"`
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
	if c.Name == "bad" {
		return errors.New(`name: "bad" is not a name`)
	}
	return nil
}

// routesLayer is a Layer over routesConfig: --route (Repeated), --name (with
// $ROUTES_NAME) and --count.
func routesLayer() (*flag.FlagSet, *flaglayer.Layer[routesConfig]) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l := flaglayer.New[routesConfig](fs)
	l.Repeated(func(c *routesConfig) *[]string { return &c.Routes }, "route", "a route; repeatable")
	l.StringEnv(func(c *routesConfig) *string { return &c.Name }, "name", "ROUTES_NAME", "a name")
	l.IntPtr(func(c *routesConfig) **int { return &c.Count }, "count", "a count")
	return fs, l
}

// TestLoad: flags set win over the environment, that over the defaults;
// a flag not set leaves its field alone; errors name the flag and are
// InvalidErrors.
func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		env     string
		args    []string
		want    routesConfig
		wantErr string
	}{
		{"", nil, routesConfig{Routes: []string{"default"}}, ""},
		{"", []string{"--route", "a", "--route", "b"}, routesConfig{Routes: []string{"a", "b"}}, ""},
		{"", []string{"--route", "a, b", "--route", "c,"}, routesConfig{Routes: []string{"a", "b", "c"}}, ""},
		{"from-env", nil, routesConfig{Routes: []string{"default"}, Name: "from-env"}, ""},
		{"from-env", []string{"--name", "flag"}, routesConfig{Routes: []string{"default"}, Name: "flag"}, ""},
		{"", []string{"--count", "3"}, routesConfig{Routes: []string{"default"}, Count: new(int)}, ""},
		{"", []string{"--route", "bad"}, routesConfig{}, `--route (routes[0]): "bad" is not a route`},
		{"bad", nil, routesConfig{}, `--name (name): "bad" is not a name`},
	} {
		t.Setenv("ROUTES_NAME", tc.env)
		fs, l := routesLayer()
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		var cfg routesConfig
		err := l.Load("", "", &cfg)
		if tc.wantErr != "" {
			var invalid flaglayer.InvalidError
			if err == nil || l.Named(err).Error() != tc.wantErr || !errors.As(l.Named(err), &invalid) {
				t.Errorf("%q: error %v, want the InvalidError %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if tc.want.Count != nil {
			*tc.want.Count = 3
		}
		if err != nil || !slices.Equal(cfg.Routes, tc.want.Routes) || cfg.Name != tc.want.Name ||
			(cfg.Count == nil) != (tc.want.Count == nil) || (cfg.Count != nil && *cfg.Count != *tc.want.Count) {
			t.Errorf("%q: %+v (%v), want %+v", tc.args, cfg, err, tc.want)
		}
	}
	if err := errors.New("other"); flaglayer.New[routesConfig](nil).Named(err) != err {
		t.Error("Named changed an error that names no field")
	}
}

// TestReadFile: a file is read strictly, its kind checked, and its errors
// name it; they are not InvalidErrors.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	head := "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ShimConfiguration\n"
	for _, tc := range []struct {
		name, text, wantErr string
	}{
		{"good.yaml", head + "limits: reject\n", ""},
		{"empty.yaml", " \n", "is empty"},
		{"unknown.yaml", head + "limit: reject\n", `unknown field "limit"`},
		{"kind.yaml", "apiVersion: dnsconfigurer.io/v1alpha1\nkind: NRIConfiguration\n", "kind"},
		{"invalid.yaml", head + "limits: cut\n", "limits:"},
	} {
		var cfg v1alpha1.ShimConfiguration
		path := write(tc.name, tc.text)
		err := flaglayer.ReadFile(path, v1alpha1.ShimKind, &cfg)
		var invalid flaglayer.InvalidError
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr == "" && cfg.Limits != v1alpha1.LimitsReject:
			t.Errorf("%s: limits %q", tc.name, cfg.Limits)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path)):
			t.Errorf("%s: error %v, want one naming the file and %q", tc.name, err, tc.wantErr)
		case errors.As(err, &invalid):
			t.Errorf("%s: %v is an InvalidError", tc.name, err)
		}
	}
	if err := flaglayer.ReadFile(filepath.Join(dir, "missing.yaml"), v1alpha1.ShimKind, &v1alpha1.ShimConfiguration{}); err == nil || !strings.HasPrefix(err.Error(), "--config: ") {
		t.Errorf("missing file: %v", err)
	}
	// A field of an embedded struct (cache's CacheTTLs) is named as the
	// file names it.
	path := write("server.yaml", "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\ncache:\n  maxTTL: 30\n")
	err := flaglayer.ReadFile(path, v1alpha1.ServerKind, &v1alpha1.ServerConfiguration{})
	if err == nil || !strings.Contains(err.Error(), "field ServerCache.cache.maxTTL of type") {
		t.Errorf("a number for cache.maxTTL: %v, want the field cache.maxTTL named", err)
	}
}
