package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// TestMain keeps the developer's cluster out of the tests: a test that
// wants $KUBECONFIG sets it, and ~/.kube/config (which explain reads, as
// kubectl does) is a file that does not exist except in
// TestExplainKubeconfig's child, which gets a HOME of its own.
func TestMain(m *testing.M) {
	os.Unsetenv("KUBECONFIG")
	noHome, err := os.MkdirTemp("", "dnsconfigurer-test-home")
	if err != nil {
		panic(err)
	}
	if os.Getenv(explainChildEnv) == "" {
		clientcmd.RecommendedHomeFile = filepath.Join(noHome, ".kube", "config")
	}
	code := m.Run()
	os.RemoveAll(noHome)
	buildbin.Remove()
	os.Exit(code)
}

// TestKubeconfigEnv: the commands with --kubeconfig read $KUBECONFIG when
// it is not given.
func TestKubeconfigEnv(t *testing.T) {
	dir := t.TempDir()
	good := apiserver.TokenKubeconfig(t, dir, "kubeconfig", "https://127.0.0.1:1")
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
			var stderr testkit.Buffer
			code := dispatch(context.Background(), tc.args, strings.NewReader(""), io.Discard, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr containing %q", code, stderr.String(), exitUsage, tc.want)
			}
		})
	}
}

// explainChildEnv holds the arguments of explain for TestExplainKubeconfig's
// child process, one a line.
const explainChildEnv = "DNSCONFIGURER_EXPLAIN_CHILD"

// TestExplainKubeconfig: explain loads kubeconfig as kubectl does. It runs
// this test binary re-executed into main (client-go finds ~/.kube/config
// from $HOME when the process starts), with a HOME holding .kube/config
// of two contexts, each with its own API server (a stand-in that records
// the pod GET's path and bearer token and answers 404; over TLS: client-go
// sent no token to a plain-http one). The server, the token and
// the namespace explain asks follow the current context, --context,
// --cluster, --user, -n, and $KUBECONFIG (a list, merged with nothing
// else), as kubectl's do.
func TestExplainKubeconfig(t *testing.T) {
	if args := os.Getenv(explainChildEnv); args != "" {
		// TestMain unset it; the parent passes it on under another name.
		os.Setenv("KUBECONFIG", os.Getenv(explainChildEnv+"_KUBECONFIG"))
		os.Args = append([]string{"dnsconfigurer", "explain"}, strings.Split(args, "\n")...)
		main() // exits
	}
	type asked struct{ server, path, token string }
	var (
		mu  sync.Mutex
		got []asked
	)
	server := func(name string) string {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = append(got, asked{name, r.URL.Path, r.Header.Get("Authorization")})
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	a, b, c := server("a"), server("b"), server("c")
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, ".kube", "config"), fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- {name: ca, cluster: {server: %q, insecure-skip-tls-verify: true}}
- {name: cb, cluster: {server: %q, insecure-skip-tls-verify: true}}
users:
- {name: ua, user: {token: ta}}
- {name: ub, user: {token: tb}}
contexts:
- {name: a, context: {cluster: ca, user: ua, namespace: shop}}
- {name: b, context: {cluster: cb, user: ub}}
current-context: a
`, a, b))
	other := writeFile(t, filepath.Join(t.TempDir(), "other"), fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- {name: cc, cluster: {server: %q, insecure-skip-tls-verify: true}}
users:
- {name: uc, user: {token: tc}}
contexts:
- {name: c, context: {cluster: cc, user: uc, namespace: lab}}
current-context: c
`, c))
	missing := filepath.Join(home, "missing")
	list := missing + string(os.PathListSeparator) + other
	tests := []struct {
		name       string
		kubeconfig string // $KUBECONFIG
		args       []string
		want       asked // path is the pod's namespace
	}{
		{"~/.kube/config's current context", "", nil, asked{"a", "shop", "ta"}},
		{"--context", "", []string{"--context", "b"}, asked{"b", "default", "tb"}},
		{"--context and -n", "", []string{"--context", "b", "-n", "x"}, asked{"b", "x", "tb"}},
		{"--namespace", "", []string{"--namespace", "x"}, asked{"a", "x", "ta"}},
		{"--cluster", "", []string{"--cluster", "cb"}, asked{"b", "shop", "ta"}},
		{"--user", "", []string{"--user", "ub"}, asked{"a", "shop", "tb"}},
		{"$KUBECONFIG over ~/.kube/config", list, nil, asked{"c", "lab", "tc"}},
		{"--kubeconfig over $KUBECONFIG", list, []string{"--kubeconfig", filepath.Join(home, ".kube", "config"), "--context", "b"}, asked{"b", "default", "tb"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			args := append([]string{"web", "--no-exec"}, tc.args...)
			cmd := exec.Command(os.Args[0], "-test.run=^TestExplainKubeconfig$")
			cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
				return strings.HasPrefix(kv, "KUBERNETES_SERVICE_HOST=") || strings.HasPrefix(kv, "KUBECONFIG=") ||
					strings.HasPrefix(kv, "HOME=")
			}), "HOME="+home, explainChildEnv+"="+strings.Join(args, "\n"), explainChildEnv+"_KUBECONFIG="+tc.kubeconfig)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitFail {
				t.Fatalf("explain %s: %v, want exit %d (pod not found)\n%s", strings.Join(args, " "), err, exitFail, out)
			}
			want := asked{tc.want.server, "/api/v1/namespaces/" + tc.want.path + "/pods/web", "Bearer " + tc.want.token}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || got[0] != want {
				t.Errorf("explain %s asked %+v, want %+v\n%s", strings.Join(args, " "), got, want, out)
			}
		})
	}
}
