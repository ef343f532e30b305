package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dnsconfigurer/dnsconfigurer/internal/imagebuild"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// Version is the registry test/testbin/registry.sh builds.
const Version = "v3.1.2"

// Env names a prebuilt registry binary. When it is set, a missing binary
// fails the test instead of skipping it.
const Env = "DNSCONFIGURER_REGISTRY"

// startTimeout bounds the wait for /v2/ to answer.
const startTimeout = 30 * time.Second

// Options tune Start. The zero value runs the registry in the test's own
// network namespace.
type Options struct {
	// NetNS is the name of a network namespace (ip netns, as
	// containerd.Harness.NetNS) to run the registry in. The address given
	// to Start must exist there.
	NetNS string
}

// Registry is a running registry. Start returns it; t.Cleanup stops it.
type Registry struct {
	// Host is the address clients name it by, "ip:port".
	Host string
	// CAFile is the CA's certificate in PEM, the only CA its certificate
	// chains to; CAPEM its content.
	CAFile string
	CAPEM  []byte
	// Dir holds the config, the certificates, the storage and the log.
	Dir string
	// NetNS is Options.NetNS.
	NetNS string

	pool   *x509.CertPool
	cmd    *exec.Cmd
	exited chan struct{}
	log    *testkit.Buffer // written by exec's copier, read by the test
}

// Binary returns the registry binary: $DNSCONFIGURER_REGISTRY, else the
// one registry.sh caches. It skips t when there is none, or fails it when
// $DNSCONFIGURER_REGISTRY names a missing file.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(Env); p != "" {
		if !isExec(p) {
			t.Fatalf("registry: $%s=%s is not an executable", Env, p)
		}
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Skipf("registry: no cache directory: %v", err)
		}
		cache = filepath.Join(home, ".cache")
	}
	p := filepath.Join(cache, "dnsconfigurer", "registry", Version, "registry")
	if !isExec(p) {
		t.Skipf("registry: no binary at %s: run test/testbin/registry.sh (or set $%s)", p, Env)
	}
	return p
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Start runs a registry on addr, "ip" or "ip:port" (no port or port 0 is
// a free port), with TLS from a CA made for this registry and its IP
// address. It returns when GET /v2/ answers 200, and fails t when that
// does not happen within 30 s.
func Start(t testing.TB, addr string, opts Options) *Registry {
	t.Helper()
	bin := Binary(t)
	ip, port, err := splitAddr(addr)
	if err != nil {
		t.Fatalf("registry: %v", err)
	}
	if opts.NetNS != "" && os.Geteuid() != 0 {
		t.Skip("registry: running in a network namespace needs root")
	}
	r := &Registry{Dir: t.TempDir(), NetNS: opts.NetNS}
	ca := testkit.NewCA(t)
	cert, key := ca.ServingFor(t, "dnsconfigurer test registry", ip.String())
	r.CAPEM, r.CAFile, r.pool = ca.PEM, filepath.Join(r.Dir, "ca.pem"), ca.Pool()
	for name, data := range map[string][]byte{"ca.pem": ca.PEM, "cert.pem": cert, "key.pem": key} {
		if err := os.WriteFile(filepath.Join(r.Dir, name), data, 0o600); err != nil {
			t.Fatalf("registry: %v", err)
		}
	}
	// A free port is taken from the kernel and released; another process
	// may grab it before the registry binds it, so try a few.
	for try := 0; ; try++ {
		p := port
		if p == 0 {
			if p, err = r.freePort(ip); err != nil {
				t.Fatalf("registry: %v", err)
			}
		}
		r.Host = netip.AddrPortFrom(ip, p).String()
		err = r.start(t, bin)
		if err == nil {
			break
		}
		if port != 0 || try == 2 || !strings.Contains(r.log.String(), "address already in use") {
			t.Fatalf("registry on %s: %v\n%s", r.Host, err, r.log.String())
		}
	}
	return r
}

// splitAddr parses "ip" or "ip:port".
func splitAddr(addr string) (netip.Addr, uint16, error) {
	if ip, err := netip.ParseAddr(addr); err == nil {
		return ip, 0, nil
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("address %q: want IP or IP:PORT", addr)
	}
	return ap.Addr(), ap.Port(), nil
}

// freePort asks the kernel for a free TCP port on ip, in the registry's
// network namespace.
func (r *Registry) freePort(ip netip.Addr) (uint16, error) {
	var port uint16
	err := r.inNetNS(func() error {
		l, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
		if err != nil {
			return err
		}
		port = uint16(l.Addr().(*net.TCPAddr).Port)
		return l.Close()
	})
	return port, err
}

// inNetNS runs fn in the registry's network namespace.
func (r *Registry) inNetNS(fn func() error) error {
	if r.NetNS == "" {
		return fn()
	}
	return testkit.InNetNS(filepath.Join("/run/netns", r.NetNS), fn)
}

// config is the registry's configuration: TLS, filesystem storage with
// deletes allowed, no access log.
func (r *Registry) config() string {
	return fmt.Sprintf(`version: 0.1
log:
  level: info
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  tls:
    certificate: %s
    key: %s
`, strconv.Quote(filepath.Join(r.Dir, "storage")), strconv.Quote(r.Host),
		strconv.Quote(filepath.Join(r.Dir, "cert.pem")), strconv.Quote(filepath.Join(r.Dir, "key.pem")))
}

// start runs the registry on r.Host and waits for /v2/. On an error the
// process is gone.
func (r *Registry) start(t testing.TB, bin string) error {
	t.Helper()
	cfg := filepath.Join(r.Dir, "config.yml")
	if err := os.WriteFile(cfg, []byte(r.config()), 0o600); err != nil {
		return err
	}
	args := []string{bin, "serve", cfg}
	if r.NetNS != "" {
		args = append([]string{"nsenter", "--net=" + filepath.Join("/run/netns", r.NetNS), "--"}, args...)
	}
	r.log = &testkit.Buffer{}
	r.cmd = exec.Command(args[0], args[1:]...)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	// No tracing exporter: the registry would try to reach a collector.
	r.cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true")
	// No Pdeathsig: it fires when the forking thread ends, and InNetNS
	// ends threads; t.Cleanup stops the registry.
	if err := r.cmd.Start(); err != nil {
		return err
	}
	r.exited = make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(r.stop)
	client := r.httpClient()
	deadline := time.Now().Add(startTimeout)
	for every := time.Millisecond; ; every = min(2*every, 50*time.Millisecond) {
		err := r.ping(client)
		if err == nil {
			return nil
		}
		select {
		case <-r.exited:
			return fmt.Errorf("exited before it answered: %s", r.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			r.stop()
			return fmt.Errorf("no answer on /v2/ within %v: %w", startTimeout, err)
		}
		select {
		case <-r.exited:
		case <-time.After(every):
		}
	}
}

// ping asks GET /v2/, which a registry without auth answers 200.
func (r *Registry) ping(c *http.Client) error {
	resp, err := c.Get("https://" + r.Host + "/v2/")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /v2/: %s", resp.Status)
	}
	return nil
}

// stop ends the registry: SIGTERM, then SIGKILL after 5 s.
func (r *Registry) stop() {
	select {
	case <-r.exited:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

// Log is what the registry has written so far.
func (r *Registry) Log() string { return r.log.String() }

// Ref is the full reference of repoTag ("dnsconfigurer:v0.3.0") in this
// registry.
func (r *Registry) Ref(repoTag string) string { return r.Host + "/" + repoTag }

// dial opens connections in the registry's network namespace.
func (r *Registry) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := r.inNetNS(func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Transport trusts the registry's CA only and dials in its network
// namespace.
func (r *Registry) Transport() *http.Transport {
	tr := remote.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = r.dial
	tr.TLSClientConfig = &tls.Config{RootCAs: r.pool, MinVersion: tls.VersionTLS12}
	return tr
}

func (r *Registry) httpClient() *http.Client {
	tr := r.Transport()
	tr.DisableKeepAlives = true
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// RemoteOptions are go-containerregistry options that reach the registry,
// anonymously, for reading back what a test pushed.
func (r *Registry) RemoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithTransport(r.Transport()), remote.WithAuth(authn.Anonymous)}
}

// Push pushes the image index of archive (hack/build-image's) to
// repoTag in this registry with the library behind hack/push-image, and
// returns what was pushed.
func (r *Registry) Push(t testing.TB, archive, repoTag string) imagebuild.PushResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := imagebuild.Push(ctx, archive, r.Ref(repoTag), imagebuild.PushOptions{
		CAFile: r.CAFile, Keychain: authn.NewMultiKeychain(), Dial: r.dial,
	})
	if err != nil {
		t.Fatalf("registry: %v\n%s", err, r.Log())
	}
	return res
}

// HostsTOML is the hosts.toml that makes containerd (1.6, 1.7 and 2.x)
// pull from the registry over TLS with its CA.
func (r *Registry) HostsTOML() string {
	server := strconv.Quote("https://" + r.Host)
	return fmt.Sprintf("server = %s\n\n[host.%s]\n  capabilities = [\"pull\", \"resolve\", \"push\"]\n  ca = %s\n", server, server, strconv.Quote(r.CAFile))
}

// WriteHostsTOML writes HostsTOML to <configPath>/<Host>/hosts.toml, where
// a containerd whose CRI registry config_path is configPath reads it at
// each pull. It returns the file's path.
func (r *Registry) WriteHostsTOML(t testing.TB, configPath string) string {
	t.Helper()
	dir := filepath.Join(configPath, r.Host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("registry: %v", err)
	}
	p := filepath.Join(dir, "hosts.toml")
	if err := os.WriteFile(p, []byte(r.HostsTOML()), 0o644); err != nil {
		t.Fatalf("registry: %v", err)
	}
	return p
}
