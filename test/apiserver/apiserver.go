package apiserver

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ServiceCIDR is the --service-cluster-ip-range of every control plane.
// Services get cluster IPs from it; 10.96.0.1 belongs to "kubernetes".
const ServiceCIDR = "10.96.0.0/16"

// AdminUser is the user name behind Config and Kubeconfig; it is in the
// system:masters group and so bypasses RBAC.
const AdminUser = "admin"

const (
	// stopGrace bounds a graceful shutdown before the group is killed.
	stopGrace = 20 * time.Second
	// pollInterval paces the readiness probes.
	pollInterval = 100 * time.Millisecond
	// portAttempts bounds retries when a free port was taken before the
	// child could bind it.
	portAttempts = 3
	// portFreeBound bounds the wait for a restarted API server's port,
	// which the previous process's socket may hold for a moment.
	portFreeBound = 10 * time.Second
)

// User is a static-token user known to the API server, added with WithUser.
type User struct {
	Name   string
	Groups []string
	token  string
}

// Option configures Start.
type Option func(*options)

type options struct {
	users   []User
	args    []string
	out     io.Writer
	network Network
}

// WithUser adds a user, authenticated by a bearer token in the API server's
// token file, whose RBAC rights the test grants itself. UserConfig returns
// a rest.Config that authenticates as it. The token file is read only at
// start-up, so users must be known then; ConfigAs impersonates any user
// without that restriction.
func WithUser(name string, groups ...string) Option {
	return func(o *options) {
		o.users = append(o.users, User{Name: name, Groups: slices.Clone(groups)})
	}
}

// WithAPIServerArgs appends flags to the kube-apiserver command line, after
// the package's own, for example "--feature-gates=WatchList=true". For a
// flag given twice the last value wins, or, for list flags, both are kept.
func WithAPIServerArgs(args ...string) Option {
	return func(o *options) { o.args = append(o.args, args...) }
}

// WithOutput copies the output of etcd and kube-apiserver to w, each line
// prefixed with the process name. The output always goes to log files in
// Dir as well, and the end of them is part of any start-up error.
func WithOutput(w io.Writer) Option {
	return func(o *options) { o.out = w }
}

// ControlPlane is a running etcd and kube-apiserver listening on 127.0.0.1.
// Its methods are safe for concurrent use.
type ControlPlane struct {
	opts       options
	binDir     string
	dir        string
	pki        *pki
	adminToken string
	users      map[string]User
	kubeconfig string
	client     *kubernetes.Clientset

	mu      sync.Mutex
	etcdURL string
	apiPort int
	etcd    *process
	api     *process // nil while stopped
	closed  bool
}

// Start starts etcd and kube-apiserver on free 127.0.0.1 ports and returns
// once /readyz answers ok. ctx bounds the start-up only; the processes run
// until Close. When the binaries are missing, the error wraps ErrNoBinaries.
func Start(ctx context.Context, opts ...Option) (_ *ControlPlane, retErr error) {
	binDir, err := BinDir()
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{binDir: binDir, users: map[string]User{}}
	for _, o := range opts {
		o(&cp.opts)
	}
	sweepStale()
	cp.dir, err = os.MkdirTemp("", dirPattern)
	if err != nil {
		return nil, fmt.Errorf("create control plane directory: %w", err)
	}
	defer func() {
		if retErr != nil {
			// Keep the start-up error; Close's would only repeat it.
			_ = cp.Close()
		}
	}()

	owner := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := os.WriteFile(filepath.Join(cp.dir, ownerFile), owner, 0o600); err != nil {
		return nil, fmt.Errorf("write owner file: %w", err)
	}
	if cp.pki, err = newPKI(cp.dir, append(kubernetesServiceIPs(cp.opts.args), cp.opts.network.Address)...); err != nil {
		return nil, err
	}
	if err := cp.writeTokens(); err != nil {
		return nil, err
	}
	if err := cp.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(ctx, true); err != nil {
		return nil, err
	}
	cp.kubeconfig = filepath.Join(cp.dir, "admin.kubeconfig")
	if err := WriteKubeconfig(cp.kubeconfig, cp.Config()); err != nil {
		return nil, err
	}
	if cp.client, err = kubernetes.NewForConfig(cp.Config()); err != nil {
		return nil, fmt.Errorf("create admin client: %w", err)
	}
	return cp, nil
}

// writeTokens writes the static token file: the admin, then WithUser users.
func (cp *ControlPlane) writeTokens() error {
	cp.adminToken = rand.Text()
	var b strings.Builder
	fmt.Fprintf(&b, "%s,%s,%s,\"system:masters\"\n", cp.adminToken, AdminUser, AdminUser)
	for _, u := range cp.opts.users {
		if _, dup := cp.users[u.Name]; dup || u.Name == AdminUser {
			return fmt.Errorf("user %q given twice", u.Name)
		}
		if strings.ContainsAny(u.Name, ",\"\n") || slices.ContainsFunc(u.Groups, func(g string) bool {
			return strings.ContainsAny(g, ",\"\n")
		}) {
			return fmt.Errorf("user %q: names and groups must not contain commas, quotes or newlines", u.Name)
		}
		u.token = rand.Text()
		cp.users[u.Name] = u
		fmt.Fprintf(&b, "%s,%s,%s,\"%s\"\n", u.token, u.Name, u.Name, strings.Join(u.Groups, ","))
	}
	if err := os.WriteFile(filepath.Join(cp.dir, "tokens.csv"), []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	return nil
}

// startEtcd starts etcd, retrying on fresh ports if one was taken.
func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	var err error
	for range portAttempts {
		var ports []int
		if ports, err = cp.freePorts(2); err != nil {
			return err
		}
		client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		args := []string{
			"--name=test",
			"--data-dir=" + filepath.Join(cp.dir, "etcd"),
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=test=" + peer,
			// Throwaway data: durability buys nothing and fsync is slow.
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		}
		bin, args := cp.opts.network.command(filepath.Join(cp.binDir, "etcd"), args)
		p, startErr := startProcess("etcd", bin, args, filepath.Join(cp.dir, "etcd.log"), cp.opts.out)
		if startErr != nil {
			return startErr
		}
		err = waitReady(ctx, p, func(ctx context.Context) error {
			return cp.probeEtcd(ctx, client)
		})
		if err == nil {
			cp.etcd, cp.etcdURL = p, client
			return nil
		}
		_ = p.stop(stopGrace)
		if !p.addrInUse() {
			return fmt.Errorf("start etcd: %w", err)
		}
	}
	return fmt.Errorf("start etcd: %w", err)
}

// startAPIServer starts kube-apiserver and waits for /readyz. On the first
// start it picks the port, retrying on a fresh one if it was taken; later
// starts reuse it, since clients hold the address.
func (cp *ControlPlane) startAPIServer(ctx context.Context, first bool) error {
	var err error
	for attempt := range portAttempts {
		if first && cp.opts.network.Port != 0 {
			cp.apiPort = cp.opts.network.Port
		} else if first {
			ports, err := cp.freePorts(1)
			if err != nil {
				return err
			}
			cp.apiPort = ports[0]
		} else if attempt > 0 {
			// The previous process's socket may linger for a moment.
			if err := cp.waitPortFree(ctx); err != nil {
				return fmt.Errorf("start kube-apiserver: %w", err)
			}
		}
		bin, args := cp.opts.network.command(filepath.Join(cp.binDir, "kube-apiserver"), cp.apiServerArgs())
		p, startErr := startProcess("kube-apiserver", bin, args, filepath.Join(cp.dir, "kube-apiserver.log"), cp.opts.out)
		if startErr != nil {
			return startErr
		}
		err = waitReady(ctx, p, cp.probeAPIServer)
		if err == nil {
			cp.api = p
			return nil
		}
		_ = p.stop(stopGrace)
		if !p.addrInUse() {
			return fmt.Errorf("start kube-apiserver: %w", err)
		}
	}
	return fmt.Errorf("start kube-apiserver: %w", err)
}

// waitPortFree waits up to portFreeBound, or until ctx ends, for the API
// server's port to be free to bind again.
func (cp *ControlPlane) waitPortFree(ctx context.Context) error {
	addr := net.JoinHostPort(cp.opts.network.address(), strconv.Itoa(cp.apiPort))
	ctx, cancel := context.WithTimeout(ctx, portFreeBound)
	defer cancel()
	for {
		l, err := cp.opts.network.listen("tcp", addr)
		if err == nil {
			return l.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still taken: %w", addr, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (cp *ControlPlane) apiServerArgs() []string {
	addr := cp.opts.network.address()
	// Without a network the control plane has no controllers and no
	// nodes: pods need no ServiceAccount and nobody reaches the API
	// server through its Service. In one, both are as in a real cluster.
	admission, reconciler := "--disable-admission-plugins=ServiceAccount", "--endpoint-reconciler-type=none"
	if cp.opts.network.NetNSPath != "" {
		admission, reconciler = "--enable-admission-plugins=NodeRestriction", "--endpoint-reconciler-type=lease"
	}
	args := []string{
		"--etcd-servers=" + cp.etcdURL,
		"--bind-address=" + addr,
		"--advertise-address=" + addr,
		"--secure-port=" + strconv.Itoa(cp.apiPort),
		"--tls-cert-file=" + cp.pki.certFile,
		"--tls-private-key-file=" + cp.pki.keyFile,
		// Unused with the files above, but keeps the default
		// /var/run/kubernetes out of reach.
		"--cert-dir=" + filepath.Join(cp.dir, "certs"),
		"--token-auth-file=" + filepath.Join(cp.dir, "tokens.csv"),
		"--authorization-mode=Node,RBAC",
		admission,
		reconciler,
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + cp.pki.saPubFile,
		"--service-account-signing-key-file=" + cp.pki.saKeyFile,
		"--allow-privileged=true",
		// On SIGTERM, wait for short requests only and then give watches
		// 2s instead of --request-timeout's 60s, so StopAPIServer is quick.
		"--shutdown-send-retry-after=true",
		"--profiling=false",
	}
	return append(args, cp.opts.args...)
}

// waitReady polls probe until it succeeds, the process exits or ctx ends.
func waitReady(ctx context.Context, p *process, probe func(context.Context) error) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = probe(pctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-p.done:
			return p.exitError()
		case <-ctx.Done():
			return fmt.Errorf("%s not ready (last probe: %w): %w\n%s", p.name, last, ctx.Err(), p.logTail(40))
		case <-tick.C:
		}
	}
}

func (cp *ControlPlane) probeEtcd(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{DialContext: cp.opts.network.dialContext, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var health struct {
		Health string `json:"health"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&health); err != nil {
		return fmt.Errorf("decode etcd health: %w", err)
	}
	if health.Health != "true" {
		return fmt.Errorf("etcd health %q", health.Health)
	}
	return nil
}

// probeAPIServer asks /readyz as the admin.
func (cp *ControlPlane) probeAPIServer(ctx context.Context) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.pki.caPEM)
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		DisableKeepAlives: true,
		DialContext:       cp.opts.network.dialContext,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.host()+"/readyz", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+cp.adminToken)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// freePorts returns n distinct ports that were free on 127.0.0.1 (of the
// control plane's namespace) a moment ago. Another process may take one
// before the child binds it; the callers retry when that happens.
func (cp *ControlPlane) freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := cp.opts.network.listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (cp *ControlPlane) host() string {
	return "https://" + net.JoinHostPort(cp.opts.network.address(), strconv.Itoa(cp.apiPort))
}

// Host returns the API server URL, https://127.0.0.1:<port> (or the
// Network's address). It stays the same across RestartAPIServer.
func (cp *ControlPlane) Host() string { return cp.host() }

// EtcdPrefix is where kube-apiserver keeps its objects in etcd: it runs
// with the default --etcd-prefix, so a Service is under
// /registry/services/specs/<namespace>/<name>.
const EtcdPrefix = "/registry"

// EtcdURL returns the client URL of etcd, http://127.0.0.1:<port>, for
// tests that read or write kube-apiserver's storage directly. It is
// reachable from this process only when the control plane runs without a
// Network.
func (cp *ControlPlane) EtcdURL() string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.etcdURL
}

// PIDs returns the process IDs of etcd and, while it runs, kube-apiserver,
// for tests that measure what the control plane itself uses.
func (cp *ControlPlane) PIDs() []int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	pids := []int{cp.etcd.cmd.Process.Pid}
	if cp.api != nil {
		pids = append(pids, cp.api.cmd.Process.Pid)
	}
	return pids
}

// CAData returns the PEM CA bundle that verifies the API server.
func (cp *ControlPlane) CAData() []byte { return slices.Clone(cp.pki.caPEM) }

// CAFile returns the path of the PEM CA bundle that verifies the API server
// (kube-controller-manager's --root-ca-file).
func (cp *ControlPlane) CAFile() string { return cp.pki.caFile }

// ServiceAccountKeyFile returns the path of the service account signing key
// (kube-controller-manager's --service-account-private-key-file).
func (cp *ControlPlane) ServiceAccountKeyFile() string { return cp.pki.saKeyFile }

// Dir returns the control plane's temporary directory, which holds the
// etcd and kube-apiserver logs (etcd.log, kube-apiserver.log), keys and
// kubeconfig files. Close removes it.
func (cp *ControlPlane) Dir() string { return cp.dir }

// Kubeconfig returns the path of a kubeconfig file for the admin user, for
// binaries that take --kubeconfig.
func (cp *ControlPlane) Kubeconfig() string { return cp.kubeconfig }

// Client returns a clientset for the admin user.
func (cp *ControlPlane) Client() kubernetes.Interface { return cp.client }

// Config returns a new rest.Config for the admin user, who is in
// system:masters. Client-side rate limiting is raised (QPS 200, burst 400)
// so tests measure the server, not the limiter.
func (cp *ControlPlane) Config() *rest.Config {
	return cp.config(cp.adminToken)
}

func (cp *ControlPlane) config(token string) *rest.Config {
	return &rest.Config{
		Host:            cp.host(),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.CAData()},
		QPS:             200,
		Burst:           400,
		UserAgent:       "dnsconfigurer-test",
		Dial:            cp.opts.network.dialContext,
	}
}

// ErrUnknownUser reports a UserConfig for a user not given to WithUser.
var ErrUnknownUser = errors.New("apiserver: unknown user")

// UserConfig returns a rest.Config that authenticates with the bearer token
// of a user added with WithUser.
func (cp *ControlPlane) UserConfig(name string) (*rest.Config, error) {
	u, ok := cp.users[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownUser, name)
	}
	return cp.config(u.token), nil
}

// ConfigAs returns a rest.Config whose requests the admin makes while
// impersonating user with groups. The API server authorizes them as that
// user (plus system:authenticated), so this checks RBAC for any user or
// service account ("system:serviceaccount:<ns>:<name>" in group
// "system:serviceaccounts") without registering a token first.
func (cp *ControlPlane) ConfigAs(user string, groups ...string) *rest.Config {
	cfg := cp.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: slices.Clone(groups)}
	return cfg
}

// StopAPIServer stops kube-apiserver gracefully, leaving etcd and its data
// up. Clients see connection errors until StartAPIServer. Stopping a stopped
// server does nothing.
func (cp *ControlPlane) StopAPIServer() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.stopAPIServer()
}

func (cp *ControlPlane) stopAPIServer() error {
	if cp.api == nil {
		return nil
	}
	err := cp.api.stop(stopGrace)
	cp.api = nil
	return err
}

// StartAPIServer starts a stopped kube-apiserver again on the same port,
// with the same flags, keys and tokens, and waits for /readyz. Starting a
// running server does nothing.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.closed {
		return errors.New("apiserver: control plane closed")
	}
	if cp.api != nil {
		return nil
	}
	return cp.startAPIServer(ctx, false)
}

// RestartAPIServer stops kube-apiserver and starts it again.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	if err := cp.StopAPIServer(); err != nil {
		return err
	}
	return cp.StartAPIServer(ctx)
}

// Close stops kube-apiserver and etcd and removes Dir. It is safe to call
// more than once.
func (cp *ControlPlane) Close() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.closed {
		return nil
	}
	cp.closed = true
	var errs []error
	if err := cp.stopAPIServer(); err != nil {
		errs = append(errs, err)
	}
	if cp.etcd != nil {
		if err := cp.etcd.stop(stopGrace); err != nil {
			errs = append(errs, err)
		}
		cp.etcd = nil
	}
	if err := os.RemoveAll(cp.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove control plane directory: %w", err))
	}
	return errors.Join(errs...)
}

// kubernetesServiceIPs are the "kubernetes" Service's addresses, the first
// of each range, for the ranges a --service-cluster-ip-range in args
// gives instead of ServiceCIDR: pods reach the API server there.
func kubernetesServiceIPs(args []string) []netip.Addr {
	var ips []netip.Addr
	for _, a := range args {
		ranges, ok := strings.CutPrefix(a, "--service-cluster-ip-range=")
		if !ok {
			continue
		}
		for _, r := range strings.Split(ranges, ",") {
			if p, err := netip.ParsePrefix(r); err == nil {
				ips = append(ips, p.Masked().Addr().Next())
			}
		}
	}
	return ips
}
