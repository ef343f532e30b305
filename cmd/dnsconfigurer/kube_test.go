package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/internal/version"
)

// TestMain keeps the developer's cluster out of the tests: a test that
// wants $KUBECONFIG sets it.
func TestMain(m *testing.M) {
	os.Unsetenv("KUBECONFIG")
	os.Exit(m.Run())
}

// writeKubeconfig writes a kubeconfig for server into dir/name.
func writeKubeconfig(t *testing.T, dir, name, server string) string {
	t.Helper()
	return writeFile(t, filepath.Join(dir, name), fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q}
users:
- name: u
  user: {token: t}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, server))
}

func TestRestConfig(t *testing.T) {
	dir := t.TempDir()
	a := writeKubeconfig(t, dir, "a", "https://a.example:6443")
	b := writeKubeconfig(t, dir, "b", "https://b.example:6443")
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name     string
		path     string
		env      string
		wantHost string // "" with no wantErr: no API server
		wantErr  string
	}{
		{name: "flag", path: a, wantHost: "https://a.example:6443"},
		{name: "flag over $KUBECONFIG", path: a, env: b, wantHost: "https://a.example:6443"},
		{name: "$KUBECONFIG", env: b, wantHost: "https://b.example:6443"},
		{name: "$KUBECONFIG list", env: missing + string(os.PathListSeparator) + b, wantHost: "https://b.example:6443"},
		{name: "$KUBECONFIG without a config", env: missing, wantErr: fmt.Sprintf("$KUBECONFIG %q: ", missing)},
		{name: "missing flag file", path: missing, env: b, wantErr: fmt.Sprintf("kubeconfig %q: ", missing)},
		{name: "neither, outside a pod", wantHost: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			rc, err := restConfig(tc.path)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q...", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			host := "" // no API server
			if rc != nil {
				host = rc.Host
			}
			if host != tc.wantHost {
				t.Errorf("host %q, want %q", host, tc.wantHost)
			}
		})
	}
}

// TestKubeClientUserAgent: the API server sees the component and the
// version in the User-Agent.
func TestKubeClientUserAgent(t *testing.T) {
	var (
		mu     sync.Mutex
		agents []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.UserAgent())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"major":"1","minor":"33","gitVersion":"v1.33.0"}`)
	}))
	defer srv.Close()
	t.Setenv("KUBECONFIG", writeKubeconfig(t, t.TempDir(), "kubeconfig", srv.URL))
	for _, component := range []string{"serve", "shim"} {
		client, err := kubeClient("", component)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := agents[len(agents)-1]
		mu.Unlock()
		if want := version.Get().UserAgent(component); got != want || !strings.HasPrefix(got, "dnsconfigurer-"+component+"/") {
			t.Errorf("%s: User-Agent %q, want %q", component, got, want)
		}
	}
}

// TestKubeconfigEnv: the commands with --kubeconfig read $KUBECONFIG when
// it is not given.
func TestKubeconfigEnv(t *testing.T) {
	dir := t.TempDir()
	good := writeKubeconfig(t, dir, "kubeconfig", "https://127.0.0.1:1")
	tests := []struct {
		name string
		env  string
		args []string
		want string
	}{
		{"serve reads it", filepath.Join(dir, "missing"), []string{"serve", "--listen", "127.0.0.1:0"}, `$KUBECONFIG "`},
		{"serve without one", "", []string{"serve", "--listen", "127.0.0.1:0"}, "no records to serve: give --kubeconfig or --objects, set $KUBECONFIG"},
		{"shim reads it", good, []string{"shim", "--resolv-conf", ""}, "--node-name (or $NODE_NAME) is required with an API server"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			t.Setenv("NODE_NAME", "")
			var stderr serveLog
			code := dispatch(context.Background(), tc.args, strings.NewReader(""), io.Discard, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr containing %q", code, stderr.String(), exitUsage, tc.want)
			}
		})
	}
}

// TestKubeNamespace: explain's default namespace is the current context's,
// as kubectl's, from the flag's file or $KUBECONFIG, else "default".
func TestKubeNamespace(t *testing.T) {
	dir := t.TempDir()
	plain := writeKubeconfig(t, dir, "plain", "https://a.example:6443")
	shop := filepath.Join(dir, "shop")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://s.example:6443\n" +
		"users:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n    namespace: shop\ncurrent-context: x\n"
	if err := os.WriteFile(shop, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, path, env, want string }{
		{name: "context namespace from the flag's file", path: shop, want: "shop"},
		{name: "context namespace from $KUBECONFIG", env: shop, want: "shop"},
		{name: "flag over $KUBECONFIG", path: plain, env: shop, want: "default"},
		{name: "no namespace in the context", path: plain, want: "default"},
		{name: "no kubeconfig", want: "default"},
		{name: "missing file", path: filepath.Join(dir, "missing"), want: "default"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			if got := kubeNamespace(tc.path); got != tc.want {
				t.Errorf("kubeNamespace(%q) with $KUBECONFIG=%q = %q, want %q", tc.path, tc.env, got, tc.want)
			}
		})
	}
}
