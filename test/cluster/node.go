package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// Binaries are what BinDir must hold besides kube-apiserver and etcd.
var Binaries = []string{"kubectl", "kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy", "e2e.test", "agnhost", "coredns"}

// BinDir returns the directory of the Kubernetes binaries that
// test/testbin/build.sh builds (or $DNSCONFIGURER_TESTBIN), or an error
// naming the first one missing.
func BinDir() (string, error) {
	dir, err := apiserver.BinDir()
	if err != nil {
		return "", err
	}
	for _, b := range Binaries {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%w: %s missing in %s", apiserver.ErrNoBinaries, b, dir)
		}
	}
	return dir, nil
}

// Ports of the node's components, on the namespace's loopback unless said.
const (
	kubeletHealthzPort = 10248
	kubeProxyHealthz   = 10256
	kcmPort            = 10257
	schedulerPort      = 10259
	shimMetricsPort    = 9310
)

func (c *Cluster) kubeletRoot() string     { return c.first().kubeletRoot() }
func (c *Cluster) path(name string) string { return filepath.Join(c.Dir, name) }

func (n *Node) kubeletRoot() string     { return n.path("kubelet") }
func (n *Node) podLogs() string         { return n.path("pod-logs") }
func (n *Node) path(name string) string { return filepath.Join(n.Dir, name) }
func (n *Node) resolvConfPath() string  { return n.path("node-resolv.conf") }
func (n *Node) shimSocket() string      { return n.path("shim.sock") }

// nodeResolvConf is the node's resolver config, kubelet's resolvConf:
// the upstream stub on the node's address and a search domain of the
// node's own, as a real node has.
func (c *Cluster) nodeResolvConf() string {
	return "nameserver " + c.primaryIP(c.first()).String() + "\nsearch node.test\n"
}

// NodeResolvConfPath is the file kubelet and the shim read as the node's
// resolv.conf (the first node's; every node's has the same content).
func (c *Cluster) NodeResolvConfPath() string { return c.first().resolvConfPath() }

// writeConfigs writes a node's kubeconfigs and component configuration
// files.
func (c *Cluster) writeConfigs(n *Node) error {
	nodeCfg, err := c.ControlPlane.UserConfig("system:node:" + n.Name)
	if err != nil {
		return err
	}
	if err := apiserver.WriteKubeconfig(n.path("kubelet.kubeconfig"), nodeCfg); err != nil {
		return err
	}
	proxyCfg, err := c.ControlPlane.UserConfig("system:kube-proxy")
	if err != nil {
		return err
	}
	if err := apiserver.WriteKubeconfig(n.path("kube-proxy.kubeconfig"), proxyCfg); err != nil {
		return err
	}
	files := map[string]string{
		"node-resolv.conf": c.nodeResolvConf(),
		"kubelet.yaml":     c.kubeletConfig(n),
		"kube-proxy.yaml":  c.kubeProxyConfig(n),
		"shim.yaml":        c.shimConfig(n),
	}
	if err := os.MkdirAll(n.path("kubelet-plugins"), 0o755); err != nil {
		return err
	}
	for name, content := range files {
		p := n.path(name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// kubeletConfig is the KubeletConfiguration. Notes on the choices:
//   - cgroupfs under the harness's cgroup parent (cgroupRoot), so the
//     harness's cleanup removes every pod cgroup; cgroup v1 is allowed.
//   - the API server reaches kubelet (logs, exec, attach, port-forward)
//     without client credentials: anonymous and AlwaysAllow, acceptable
//     in a namespace nothing else can reach.
//   - no image GC and eviction thresholds near zero: the stand-in images
//     cannot be pulled again, and the test machine's disk is shared.
func (c *Cluster) kubeletConfig(n *Node) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[2]d
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupRoot: %[3]s
cgroupsPerQOS: true
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://%[4]s
imageServiceEndpoint: unix://%[4]s
clusterDNS: [%[5]s]
clusterDomain: %[6]s
resolvConf: %[7]s
podLogsDir: %[8]s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
volumePluginDir: %[9]s
syncFrequency: 10s
fileCheckFrequency: 10s
serializeImagePulls: false
`, c.primaryIP(n), kubeletHealthzPort, n.Harness.CgroupParent, c.runtimeSocket(n), c.clusterDNS(), ClusterDomain,
		n.resolvConfPath(), n.podLogs(), n.path("kubelet-plugins"))
}

// kubeProxyConfig is kube-proxy's configuration: iptables mode (or
// Options.ProxyMode), and no conntrack settings, which are global sysctls
// of the machine.
func (c *Cluster) kubeProxyConfig(n *Node) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: %s
clusterCIDR: %s
hostnameOverride: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, n.path("kube-proxy.kubeconfig"), c.proxyMode, c.clusterCIDRs(), n.Name, kubeProxyHealthz)
}

// runtimeSocket is kubelet's containerRuntimeEndpoint: the shim's socket,
// or containerd's own when the NRI plugin is the agent.
func (c *Cluster) runtimeSocket(n *Node) string {
	if c.Agent == AgentNRI {
		return n.Harness.Socket
	}
	return n.shimSocket()
}

// shimConfig is the ShimConfiguration: kubelet's DNS settings, the node's
// resolv.conf, the nameservers of autopath pods (the node-local address,
// then the cluster DNS as deploy/shim/shim.yaml has them), and the API
// server for pod lookups with the node's own credentials.
func (c *Cluster) shimConfig(n *Node) string {
	return fmt.Sprintf(`apiVersion: dnsconfigurer.io/v1alpha1
kind: ShimConfiguration
clusterDNS: [%s]
clusterDomain: %s
resolvConf: %s
nodeLocalDNS: [%s, %s]
listen: %s
runtimeEndpoint: %s
kubeconfig: %s
nodeName: %s
metricsListen: 127.0.0.1:%d
`, c.clusterDNS(), ClusterDomain, n.resolvConfPath(), c.nodeLocalDNS(), c.firstClusterDNS(), n.shimSocket(), n.Harness.Endpoint,
		n.path("kubelet.kubeconfig"), n.Name, shimMetricsPort)
}

// command is each component's command line on node n.
func (c *Cluster) command(n *Node, name string) (string, []string) {
	bin := filepath.Join(c.BinDir, name)
	switch name {
	case "kube-controller-manager":
		return bin, append(c.controllerFlags(kcmPort, "kcm-certs"),
			"--service-account-private-key-file="+c.ControlPlane.ServiceAccountKeyFile(),
			"--root-ca-file="+c.ControlPlane.CAFile(),
			"--use-service-account-credentials=true",
			"--service-cluster-ip-range="+c.serviceCIDRs(),
			"--cluster-name=dnscfg",
		)
	case "kube-scheduler":
		return bin, c.controllerFlags(schedulerPort, "scheduler-certs")
	case "shim":
		return c.Product, []string{"shim", "--config", n.path("shim.yaml"), "--log-level", "debug"}
	case "kubelet":
		return bin, []string{
			"--config=" + n.path("kubelet.yaml"),
			"--kubeconfig=" + n.path("kubelet.kubeconfig"),
			"--root-dir=" + n.kubeletRoot(),
			"--cert-dir=" + n.path("kubelet-pki"),
			"--hostname-override=" + n.Name,
			"--node-ip=" + c.nodeIPs(n),
			"--v=2",
		}
	case "kube-proxy":
		return bin, []string{"--config=" + n.path("kube-proxy.yaml"), "--v=2"}
	}
	panic("cluster: unknown component " + name)
}

// controllerFlags are what kube-controller-manager and kube-scheduler
// share: the admin's kubeconfig for everything, a secure port on the
// namespace's loopback with a self-signed certificate in certDir, and no
// leader election (one replica).
func (c *Cluster) controllerFlags(port int, certDir string) []string {
	return []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + c.path(certDir),
		"--leader-elect=false",
		"--v=1",
	}
}

// healthy probes a component's health endpoint from inside its node's
// namespace.
func (c *Cluster) healthy(ctx context.Context, n *Node, name string) (bool, error) {
	var url string
	switch name {
	case "kube-controller-manager":
		url = fmt.Sprintf("https://127.0.0.1:%d/healthz", kcmPort)
	case "kube-scheduler":
		url = fmt.Sprintf("https://127.0.0.1:%d/healthz", schedulerPort)
	case "shim":
		url = fmt.Sprintf("http://127.0.0.1:%d/readyz", shimMetricsPort)
	case "kubelet":
		url = fmt.Sprintf("http://127.0.0.1:%d/healthz", kubeletHealthzPort)
	case "kube-proxy":
		// /healthz turns healthy only once the node exists and rules
		// were synced; /livez answers as soon as it serves.
		url = fmt.Sprintf("http://127.0.0.1:%d/livez", kubeProxyHealthz)
	default:
		return false, fmt.Errorf("no probe for %q", name)
	}
	return c.probe(ctx, n, url)
}

// probe GETs url from inside node n's namespace and reports a 200.
func (c *Cluster) probe(ctx context.Context, n *Node, url string) (bool, error) {
	client := &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			DialContext:       n.dialContext,
			DisableKeepAlives: true,
			// The components serve self-signed certificates; this only
			// asks whether they are up.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return true, nil
}

// dialContext dials from inside the first node's network namespace.
func (c *Cluster) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return c.first().dialContext(ctx, network, addr)
}

// dialContext dials from inside the node's network namespace.
func (n *Node) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := n.Harness.Do(func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// waitNodeReady waits for a node object to turn Ready.
func (c *Cluster) waitNodeReady(ctx context.Context, name string) error {
	return waitFor(ctx, "node "+name+" Ready", func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return true, nil
				}
				return false, fmt.Errorf("Ready=%s: %s", cond.Status, cond.Message)
			}
		}
		return false, nil
	})
}

// hostSysctls are the machine-wide settings kubelet changes on start
// (kernel.panic, kernel.panic_on_oops, vm.overcommit_memory, and the key
// quotas), restored when the cluster stops.
var hostSysctls = []string{
	"kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "vm/panic_on_oom",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// saveSysctls records the machine-wide sysctls in memory and in the
// cluster directory's owner file, so that a later Start restores them if
// this test process dies before its cleanup (see sweepStale).
func (c *Cluster) saveSysctls() error {
	c.sysctls = HostSysctls()
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", os.Getpid())
	for k, v := range c.sysctls {
		fmt.Fprintf(&b, "%s %s\n", k, v)
	}
	return os.WriteFile(filepath.Join(c.Dir, ownerFile), []byte(b.String()), 0o644)
}

func (c *Cluster) restoreSysctls() {
	if err := restoreSysctls(c.sysctls); err != nil {
		c.t.Errorf("cluster: %v", err)
	}
}

func restoreSysctls(saved map[string]string) error {
	var errs []error
	for k, v := range saved {
		if !slices.Contains(hostSysctls, k) {
			continue
		}
		p := filepath.Join("/proc/sys", k)
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == v {
			continue
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", k, v, err))
		}
	}
	return errors.Join(errs...)
}

// dirPrefix names cluster directories under os.TempDir; ownerFile, in one,
// holds the owning test process's PID and the sysctls it saved.
const (
	dirPrefix = "dnscfg-cluster-"
	ownerFile = "owner"
)

// sweepStale cleans up after clusters whose test process died without its
// cleanup (a go test -timeout, a panic): their processes died with it
// (parent-death signal) and the harness sweeps the namespace and cgroups,
// but kubelet's mounts stay in the machine's mount namespace and the
// sysctls kubelet set stay set. This unmounts, restores and removes.
func sweepStale(t testing.TB) {
	owners, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*", ownerFile))
	for _, o := range owners {
		b, err := os.ReadFile(o)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		pid, err := strconv.Atoi(lines[0])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // owner alive
		}
		dir := filepath.Dir(o)
		t.Logf("cluster: sweeping %s left by dead process %d", dir, pid)
		saved := map[string]string{}
		for _, l := range lines[1:] {
			if k, v, ok := strings.Cut(l, " "); ok {
				saved[k] = v
			}
		}
		errs := []error{restoreSysctls(saved)}
		if mounts, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(mounts), dir) {
			roots, _ := filepath.Glob(filepath.Join(dir, "*", "kubelet"))
			for _, root := range append([]string{filepath.Join(dir, "kubelet")}, roots...) {
				if strings.Contains(string(mounts), root) {
					errs = append(errs, run(context.Background(), "umount", "--recursive", "--lazy", root))
				}
			}
		}
		if _, err := os.Stat(filepath.Join("/run/netns", fabricNetNS(dir))); err == nil {
			errs = append(errs, run(context.Background(), "ip", "netns", "del", fabricNetNS(dir)))
		}
		errs = append(errs, os.RemoveAll(dir))
		if err := errors.Join(errs...); err != nil {
			t.Logf("cluster: sweep %s: %v", dir, err)
		}
	}
}

// HostSysctls returns the current values of the machine-wide sysctls the
// cluster saved and restores, for a test that checks the restore.
func HostSysctls() map[string]string {
	m := map[string]string{}
	for _, k := range hostSysctls {
		if b, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			m[k] = strings.TrimSpace(string(b))
		}
	}
	return m
}

// nsSysctl sets a per-namespace sysctl inside node n's namespace.
func nsSysctl(ctx context.Context, n *Node, key, value string) error {
	p := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+n.Harness.NetNSPath, "--", "sh", "-c", `echo "$2" > "$1"`, "sh", p, value)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("set %s=%s in the node namespace: %w: %s", key, value, err, out)
	}
	return nil
}
