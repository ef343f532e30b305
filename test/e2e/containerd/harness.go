package containerd

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Image references of the images every harness imports.
const (
	PauseImage = "dnsconfigurer.test/pause:e2e"
	TestImage  = "dnsconfigurer.test/testbin:e2e"
	// TestBinary is where the test binary sits in TestImage.
	TestBinary = "/testbin"
	// CRINamespace is the containerd namespace the CRI plugin uses.
	CRINamespace = "k8s.io"
)

// cniBinDirs are searched in order for the bridge, host-local and loopback
// plugins (Debian installs them in /usr/lib/cni).
var cniBinDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}

// Options tune a harness. The zero value is a working setup.
type Options struct {
	// Routes are extra prefixes that pods route via BridgeAddr, for
	// example a Service CIDR whose addresses a server started in the
	// namespace holds. The default is none: pods reach PodSubnet only.
	Routes []netip.Prefix
	// HostResolvConf, when set, is what containerd sees as the host's
	// /etc/resolv.conf: it copies it for sandboxes without a DNS config and
	// for host-network sandboxes. It is written to h.HostResolvConf and
	// bind-mounted over /etc/resolv.conf in containerd's private mount
	// namespace; rewrite that file in place (not by rename) to change it.
	// Empty means the machine's own /etc/resolv.conf.
	HostResolvConf string
	// LogLevel is containerd's log level; the default is "info".
	LogLevel string
	// StartTimeout bounds the start; the default is 60s.
	StartTimeout time.Duration
	// SharedDirs are existing directories that containerd must see the
	// later mounts of, as a kubelet's root directory (the tmpfs volumes
	// of ServiceAccount tokens and secrets are mounted under it after
	// containerd started). Each is bind-mounted onto itself and made a
	// shared mount before containerd starts; containerd's mount namespace
	// is then a slave of the machine's, so mounts made under these
	// directories reach it. Close unmounts them, and everything mounted
	// under them, after containerd stopped.
	SharedDirs []string
	// Images are extra OCI image tarballs (reference → file) to import
	// besides the pause and test images.
	Images map[string]string
	// Runtime is the containerd to run; the zero value is
	// DefaultRuntime() (see RuntimeEnv).
	Runtime *Runtime
	// RegistryConfigDir, when set, is the CRI plugin's registry
	// config_path: a directory of <host>/hosts.toml files (mirrors, plain
	// HTTP), read at each pull, so they may be written after Start.
	RegistryConfigDir string
	// SharedRoot makes / an rshared mount inside containerd's mount
	// namespace, as systemd makes it on a node, so that containers may
	// ask for Bidirectional and HostToContainer mount propagation. The
	// namespace stays private (or a slave, with SharedDirs) of the
	// machine's: nothing mounted in it reaches the machine. NodeCommand
	// runs a process in it.
	SharedRoot bool
	// HostPorts adds the portmap plugin to the CNI chain, so sandboxes'
	// port mappings (hostPort) forward from the harness's namespace,
	// 127.0.0.1 included. It needs iptables.
	HostPorts bool
	// PodSubnet is this harness's pod network, a /24 of which the bridge
	// holds the first address (Harness.BridgeAddr). The default is
	// PodSubnet; the nodes of a multi-node cluster each take their own.
	PodSubnet netip.Prefix
	// NodeDirs maps directories of the machine to this node's own: each
	// is bind-mounted over the machine's in containerd's mount namespace,
	// so a hostPath volume of that path is the node's own directory, as
	// when each node is a machine. The machine's directory must exist.
	NodeDirs map[string]string
	// PodSubnet6, when set, makes the pod network dual-stack: pods get an
	// address of this IPv6 /64 too, and the bridge its first one
	// (Harness.BridgeAddr6). Routes of the IPv6 family go via it.
	PodSubnet6 netip.Prefix
	// IPv6Only gives pods an address of PodSubnet6 only (it must be set);
	// the bridge keeps its IPv4 address for the node's own servers.
	IPv6Only bool
	// NRISocket is where containerd 2.x puts its NRI socket; the default
	// is nri.sock in the harness's directory. Its directory is created.
	NRISocket string
}

// Harness is a running containerd with the CRI plugin, runc and a CNI
// bridge, all inside a network namespace of its own. Start returns it;
// Close (registered with t.Cleanup) tears everything down.
type Harness struct {
	// Dir is the harness's temporary directory (config, root, state,
	// socket, pod logs, containerd.log).
	Dir string
	// Socket is containerd's gRPC socket path; Endpoint is the same as a
	// "unix://" URL, as kubelet's --container-runtime-endpoint takes it.
	Socket   string
	Endpoint string
	// NRISocket is containerd 2.x's NRI socket (NRI plugins register on
	// it); "" with containerd 1.x, whose config leaves NRI off.
	NRISocket string
	// NetNS is the network namespace's name ("dnscfg-e2e-<random>") and
	// NetNSPath its bind mount (/run/netns/<name>).
	NetNS     string
	NetNSPath string
	// LogRoot holds the pods' log directories.
	LogRoot string
	// CgroupParent is the cgroup under which clients from Client and Dial
	// put sandboxes, so Close can find whatever is left.
	CgroupParent string
	// HostResolvConf is the path of the file from Options.HostResolvConf,
	// or "" when the machine's /etc/resolv.conf is used.
	HostResolvConf string
	// Versions of the binaries in use, as they print them, and
	// containerd's major version (1 or 2).
	ContainerdVersion, RuncVersion string
	ContainerdMajor                int
	// Runtime is the containerd in use.
	Runtime Runtime
	// Started is how long Start took.
	Started time.Duration
	// SharedDirs are Options.SharedDirs, once mounted.
	SharedDirs []string
	// PodSubnet is Options.PodSubnet (or the default) and BridgeAddr the
	// bridge's address in it.
	PodSubnet  netip.Prefix
	BridgeAddr netip.Addr
	// PodSubnet6 and BridgeAddr6 are the IPv6 ones of a dual-stack pod
	// network (Options.PodSubnet6); invalid otherwise.
	PodSubnet6  netip.Prefix
	BridgeAddr6 netip.Addr

	t       testing.TB
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been waited for
	release func()        // called by Close to unlock the forking thread
	logFile *os.File
	cniBin  string

	launchArgs  []string // the containerd shell's arguments (launch)
	propagation string   // its mount namespace's propagation

	closeOnce sync.Once
	clients   []*Client
	mu        sync.Mutex
}

// Require skips t unless the machine can run a harness: root, Linux, and
// containerd, containerd-shim-runc-v2, ctr, runc, ip, nsenter, unshare and
// the CNI plugins installed. It returns the CNI plugin directory.
func Require(t testing.TB) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("containerd e2e: needs linux")
	}
	if os.Geteuid() != 0 {
		t.Skip("containerd e2e: needs root (run as root after test/e2e/setup.sh)")
	}
	var missing []string
	rt := DefaultRuntime()
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "ctr"} {
		if _, err := exec.LookPath(rt.bin(bin)); err != nil {
			if rt.BinDir != "" {
				t.Fatalf("containerd e2e: $%s=%s lacks %s: %v", RuntimeEnv, rt.BinDir, bin, err)
			}
			missing = append(missing, bin)
		}
	}
	for _, bin := range []string{"runc", "ip", "nsenter", "unshare", "mount"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	cniBin := ""
	for _, d := range cniBinDirs {
		if isExec(filepath.Join(d, "bridge")) && isExec(filepath.Join(d, "host-local")) && isExec(filepath.Join(d, "loopback")) {
			cniBin = d
			break
		}
	}
	if cniBin == "" {
		missing = append(missing, "CNI plugins (bridge, host-local, loopback)")
	}
	if len(missing) > 0 {
		t.Skipf("containerd e2e: missing %s; run test/e2e/setup.sh", strings.Join(missing, ", "))
	}
	return cniBin
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Start creates a network namespace, starts containerd in it with a
// config, root, state and socket of its own under a temporary directory,
// imports the pause and test images, and waits until the CRI plugin
// reports the runtime and the network ready. It skips t when the machine
// lacks what it needs (see Require) and fails t on any other error.
func Start(t testing.TB, opts Options) *Harness {
	t.Helper()
	cniBin := Require(t)
	begin := time.Now()
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()

	images, err := buildImages(ctx)
	if err != nil {
		t.Fatalf("containerd e2e: %v", err)
	}

	sweepStale(t)
	// A short directory name: socket paths must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "dnscfg-e2e-")
	if err != nil {
		t.Fatalf("containerd e2e: %v", err)
	}
	// Traversable by the remapped users of user-namespaced pods, whose
	// files live under root and state.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatalf("containerd e2e: %v", err)
	}
	suffix := strings.TrimPrefix(filepath.Base(dir), "dnscfg-e2e-")
	id := randomHex(4)
	h := &Harness{
		t:            t,
		Dir:          dir,
		Socket:       filepath.Join(dir, "containerd.sock"),
		NetNS:        "dnscfg-e2e-" + id,
		NetNSPath:    filepath.Join("/run/netns", "dnscfg-e2e-"+id),
		LogRoot:      filepath.Join(dir, "pods"),
		CgroupParent: "/dnscfg-e2e-" + id + "-" + suffix,
		cniBin:       cniBin,
		Runtime:      DefaultRuntime(),
	}
	if opts.Runtime != nil {
		h.Runtime = *opts.Runtime
	}
	h.PodSubnet = PodSubnet
	if opts.PodSubnet.IsValid() {
		if opts.PodSubnet.Bits() != 24 || !opts.PodSubnet.Addr().Is4() {
			t.Fatalf("containerd e2e: pod subnet %s is not an IPv4 /24", opts.PodSubnet)
		}
		h.PodSubnet = opts.PodSubnet.Masked()
	}
	h.BridgeAddr = h.PodSubnet.Addr().Next()
	if opts.PodSubnet6.IsValid() {
		if opts.PodSubnet6.Bits() != 64 || !opts.PodSubnet6.Addr().Is6() {
			t.Fatalf("containerd e2e: pod subnet %s is not an IPv6 /64", opts.PodSubnet6)
		}
		h.PodSubnet6 = opts.PodSubnet6.Masked()
		h.BridgeAddr6 = h.PodSubnet6.Addr().Next()
	}
	h.Endpoint = "unix://" + h.Socket
	t.Cleanup(h.Close)
	owner := fmt.Sprintf("%d %s %s\n", os.Getpid(), h.NetNS, h.CgroupParent)
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o644); err != nil {
		t.Fatalf("containerd e2e: %v", err)
	}
	if err := h.start(ctx, opts, images); err != nil {
		t.Fatalf("containerd e2e: %v%s", err, h.logTail(40))
	}
	h.Started = time.Since(begin)
	return h
}

func (h *Harness) start(ctx context.Context, opts Options, images map[string][]byte) error {
	p := paths{
		root:        filepath.Join(h.Dir, "root"),
		state:       filepath.Join(h.Dir, "state"),
		socket:      h.Socket,
		runcRoot:    filepath.Join(h.Dir, "runc"),
		opt:         filepath.Join(h.Dir, "opt"),
		cniConfDir:  filepath.Join(h.Dir, "cni", "net.d"),
		cniBinDir:   h.cniBin,
		ipamDir:     filepath.Join(h.Dir, "cni", "ipam"),
		nriSocket:   cmp.Or(opts.NRISocket, filepath.Join(h.Dir, "nri.sock")),
		nriDir:      filepath.Join(h.Dir, "nri"),
		registryDir: opts.RegistryConfigDir,
	}
	for _, d := range []string{filepath.Dir(p.nriSocket), p.root, p.state, p.runcRoot, p.opt, p.nriDir, p.cniConfDir, p.ipamDir, filepath.Join(h.Dir, "cni", "cache"), h.LogRoot, filepath.Join(h.Dir, "run"), filepath.Join(h.Dir, "images")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	var err error
	if h.ContainerdVersion, err = output(ctx, h.Runtime.bin("containerd"), "--version"); err != nil {
		return err
	}
	if h.ContainerdMajor, err = majorVersion(h.ContainerdVersion); err != nil {
		return err
	}
	render := containerdConfig
	if h.ContainerdMajor >= 2 {
		render = containerdConfigV3
		h.NRISocket = p.nriSocket
	}
	config := filepath.Join(h.Dir, "config.toml")
	if err := os.WriteFile(config, []byte(render(p)), 0o644); err != nil {
		return err
	}
	subnet := h.PodSubnet
	if opts.IPv6Only {
		if !h.PodSubnet6.IsValid() {
			return errors.New("IPv6Only without PodSubnet6")
		}
		subnet = netip.Prefix{}
	}
	cni, err := cniConfList(p.ipamDir, subnet, h.PodSubnet6, opts.Routes, opts.HostPorts)
	if err != nil {
		return fmt.Errorf("render cni config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(p.cniConfDir, "10-dnscfg-e2e.conflist"), cni, 0o644); err != nil {
		return err
	}
	if opts.HostResolvConf != "" {
		h.HostResolvConf = filepath.Join(h.Dir, "host-resolv.conf")
		if err := os.WriteFile(h.HostResolvConf, []byte(opts.HostResolvConf), 0o644); err != nil {
			return err
		}
	}

	if err := h.setupNetNS(ctx); err != nil {
		return err
	}
	propagation := "private"
	if len(opts.SharedDirs) > 0 {
		propagation = "slave"
		for _, d := range opts.SharedDirs {
			if _, err := output(ctx, "mount", "--bind", d, d); err != nil {
				return err
			}
			h.SharedDirs = append(h.SharedDirs, d)
			if _, err := output(ctx, "mount", "--make-shared", d); err != nil {
				return err
			}
		}
	}
	if v, err := output(ctx, "runc", "--version"); err == nil {
		h.RuncVersion, _, _ = strings.Cut(v, "\n")
	} else {
		return err
	}

	h.launchArgs = []string{h.Dir, h.HostResolvConf, opts.LogLevel, h.Runtime.bin("containerd"), ""}
	if opts.SharedRoot {
		h.launchArgs[4] = "1"
	}
	for _, machine := range slices.Sorted(maps.Keys(opts.NodeDirs)) {
		if err := os.MkdirAll(opts.NodeDirs[machine], 0o755); err != nil {
			return err
		}
		h.launchArgs = append(h.launchArgs, machine, opts.NodeDirs[machine])
	}
	h.propagation = propagation
	h.logFile, err = os.Create(filepath.Join(h.Dir, "containerd.log"))
	if err != nil {
		return err
	}
	if err := h.launch(); err != nil {
		return err
	}
	c, err := Dial(h.Endpoint)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := h.waitReady(ctx, c); err != nil {
		return err
	}
	files := map[string]string{}
	for ref, tarball := range images {
		file := filepath.Join(h.Dir, "images", strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
		if err := os.WriteFile(file, tarball, 0o644); err != nil {
			return err
		}
		files[ref] = file
	}
	for ref, file := range opts.Images {
		files[ref] = file
	}
	for ref, file := range files {
		if _, err := output(ctx, h.Runtime.bin("ctr"), "--address", h.Socket, "--namespace", CRINamespace, "images", "import", file); err != nil {
			return fmt.Errorf("import %q: %w", ref, err)
		}
	}
	// The CRI plugin learns of imported images from containerd's events;
	// wait until it knows them all.
	for ref := range files {
		if err := poll(ctx, func() (bool, error) {
			resp, err := c.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
			return err == nil && resp.GetImage() != nil, nil
		}); err != nil {
			return fmt.Errorf("wait for image %q in the CRI plugin: %w", ref, err)
		}
	}
	return nil
}

// launch starts containerd's shell in the harness's namespaces (a new
// private mount and PID namespace each time) with h.launchArgs.
func (h *Harness) launch() error {
	// containerd must see the machine's cgroup mounts, which `ip netns
	// exec` hides (it remounts /sys), so the namespace is joined with
	// nsenter instead. unshare gives containerd a private mount namespace
	// (its overlay, shm and netns mounts never reach the host and vanish
	// with it) and a PID namespace whose PID 1 is the shell below (when it
	// exits the kernel kills every shim and container left). Inside, the
	// shims' socket directory /run/containerd is a bind mount of Dir/run,
	// and libcni's result cache /var/lib/cni one of Dir/cni/cache. The
	// shell runs containerd and, when containerd exits with the restart
	// file present (Restart), removes it and runs containerd again in the
	// same namespaces; otherwise it exits with containerd. The node's own
	// directories (Options.NodeDirs) are bind-mounted over the machine's.
	const script = `set -e
dir=$1 resolv=$2 level=$3 bin=$4 shared=$5
shift 5
mkdir -p /run/containerd
mount --bind "$dir/run" /run/containerd
mkdir -p /var/lib/cni
mount --bind "$dir/cni/cache" /var/lib/cni
if [ -n "$resolv" ]; then mount --bind "$resolv" /etc/resolv.conf; fi
while [ $# -ge 2 ]; do mount --bind "$2" "$1"; shift 2; done
if [ -n "$shared" ]; then mount --make-rshared /; fi
while :; do
	"$bin" --config "$dir/config.toml" --log-level "$level" &
	wait $! || true
	rm "$dir/` + restartFile + `" 2>/dev/null || exit 0
done
`
	h.cmd = exec.Command("nsenter", append([]string{"--net=" + h.NetNSPath, "--",
		"unshare", "--mount", "--propagation", h.propagation, "--pid", "--fork", "--mount-proc", "--kill-child",
		"--", "/bin/sh", "-c", script, "sh"}, h.launchArgs...)...)
	h.cmd.Env = h.Runtime.env()
	h.cmd.Stdout, h.cmd.Stderr = h.logFile, h.logFile
	// Should the test process die without cleaning up (a go test timeout
	// exits at once), the kernel kills unshare, which kills containerd, and
	// the next Start sweeps the rest (see sweepStale). The death signal
	// follows the thread that forked, so that thread stays locked to a
	// goroutine until Close.
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	h.exited = make(chan struct{})
	release, err := testkit.StartLocked(h.cmd)
	if err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	h.release = release
	cmd, exited := h.cmd, h.exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return nil
}

// setupNetNS creates the namespace with loopback up and the pod bridge up
// with BridgeAddr, so that test servers have an address pods reach. The
// namespace has no other link: nothing in it can reach the machine's
// network or beyond.
func (h *Harness) setupNetNS(ctx context.Context) error {
	if _, err := output(ctx, "ip", "netns", "add", h.NetNS); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		// A fixed MAC: a bridge without one takes the lowest MAC of its
		// ports, so it changes as pods come and go, and a running pod's
		// ARP entry for BridgeAddr goes stale; its packets are then lost
		// until the entry expires (about 30 s).
		{"link", "add", BridgeName, "address", bridgeMAC, "type", "bridge"},
		{"addr", "add", netip.PrefixFrom(h.BridgeAddr, h.PodSubnet.Bits()).String(), "dev", BridgeName},
		{"link", "set", BridgeName, "up"},
	} {
		if _, err := output(ctx, "ip", append([]string{"-n", h.NetNS}, args...)...); err != nil {
			return err
		}
	}
	if !h.PodSubnet6.IsValid() {
		return nil
	}
	// No duplicate address detection: the address is usable at once.
	for _, args := range [][]string{
		{"addr", "add", netip.PrefixFrom(h.BridgeAddr6, h.PodSubnet6.Bits()).String(), "dev", BridgeName, "nodad"},
	} {
		if _, err := output(ctx, "ip", append([]string{"-n", h.NetNS}, args...)...); err != nil {
			return err
		}
	}
	return nil
}

// waitReady polls the CRI Status until the runtime and the network are
// ready, or containerd exits.
func (h *Harness) waitReady(ctx context.Context, c *Client) error {
	var last string
	err := poll(ctx, func() (bool, error) {
		select {
		case <-h.exited:
			return false, fmt.Errorf("containerd exited: %v", h.cmd.ProcessState)
		default:
		}
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := c.Runtime.Status(callCtx, &runtimeapi.StatusRequest{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		ready := 0
		for _, cond := range resp.GetStatus().GetConditions() {
			if (cond.Type == runtimeapi.RuntimeReady || cond.Type == runtimeapi.NetworkReady) && cond.Status {
				ready++
			} else if !cond.Status {
				last = fmt.Sprintf("%s: %s %s", cond.Type, cond.Reason, cond.Message)
			}
		}
		return ready == 2, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the CRI plugin (last: %s): %w", last, err)
	}
	return nil
}

// Client returns a CRI client connected to this containerd, closed by
// Close.
func (h *Harness) Client() *Client {
	return h.Dial(h.Endpoint)
}

// Dial returns a CRI client for endpoint (a socket path or unix:// URL,
// for example a shim in front of this containerd) that logs pods under
// h.LogRoot and puts sandboxes under h.CgroupParent. Close closes it.
func (h *Harness) Dial(endpoint string) *Client {
	h.t.Helper()
	c, err := Dial(endpoint)
	if err != nil {
		h.t.Fatalf("containerd e2e: %v", err)
	}
	c.LogRoot, c.CgroupParent = h.LogRoot, h.CgroupParent
	h.mu.Lock()
	h.clients = append(h.clients, c)
	h.mu.Unlock()
	return c
}

// Command returns a command that runs name in the harness's network
// namespace (and otherwise in the caller's namespaces), for servers the
// pods should reach, for example one listening on BridgeAddr.
func (h *Harness) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + h.NetNSPath, "--", name}, args...)...)
}

// NodeCommand returns a command that runs name as a process of the node
// containerd runs on: in the harness's network namespace and in
// containerd's own mount and PID namespaces. Mounts it makes reach
// containerd (and, with Options.SharedRoot, containers asking for mount
// propagation, and back), and it sees the processes of host-PID
// containers. Call it after Start.
func (h *Harness) NodeCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	// The unshare process entered the new mount namespace itself; its
	// children (containerd's shell, PID 1) are in the new PID namespace.
	ns := fmt.Sprintf("/proc/%d/ns/", h.cmd.Process.Pid)
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + h.NetNSPath,
		"--mount=" + ns + "mnt", "--pid=" + ns + "pid_for_children", "--", name}, args...)...)
}

// Do runs fn on an OS thread switched into the harness's network
// namespace. Sockets fn opens stay in that namespace after it returns, so a
// test can serve in-process on BridgeAddr. The thread is discarded after.
func (h *Harness) Do(fn func() error) error { return testkit.InNetNS(h.NetNSPath, fn) }

// AddAddress adds an address to the loopback interface of the harness's
// network namespace, for a server that pods reach through Options.Routes
// (a cluster DNS Service IP such as 10.96.0.10/32, or a node-local
// link-local address).
// An IPv6 address skips duplicate address detection: it is usable at
// once, not tentative until the kernel's DAD work runs.
func (h *Harness) AddAddress(ctx context.Context, p netip.Prefix) error {
	args := []string{"-n", h.NetNS, "addr", "add", p.String(), "dev", "lo"}
	if p.Addr().Is6() {
		args = append(args, "nodad")
	}
	_, err := output(ctx, "ip", args...)
	return err
}

// ContainerdLog returns containerd's log so far.
func (h *Harness) ContainerdLog() string {
	b, _ := os.ReadFile(filepath.Join(h.Dir, "containerd.log"))
	return string(b)
}

func (h *Harness) logTail(n int) string {
	lines := strings.Split(strings.TrimRight(h.ContainerdLog(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return "\ncontainerd.log (tail):\n" + strings.Join(lines, "\n")
}

// Close removes every sandbox through the CRI, stops containerd (SIGTERM,
// then SIGKILL to its process group after 10s), removes the cgroups left
// under CgroupParent, deletes the network namespace and the temporary
// directory. It is safe to call more than once; t.Cleanup calls it.
func (h *Harness) Close() {
	h.closeOnce.Do(func() {
		var errs []error
		h.mu.Lock()
		for _, c := range h.clients {
			c.Close()
		}
		h.mu.Unlock()
		if h.cmd != nil && h.cmd.Process != nil {
			errs = append(errs, h.removeSandboxes())
			errs = append(errs, h.stopContainerd())
		}
		if h.release != nil {
			h.release()
		}
		if h.logFile != nil {
			h.logFile.Close()
		}
		errs = append(errs, removeCgroups(h.CgroupParent))
		for _, d := range h.SharedDirs {
			errs = append(errs, unmountTree(d))
		}
		if _, err := os.Stat(h.NetNSPath); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := output(ctx, "ip", "netns", "del", h.NetNS)
			cancel()
			errs = append(errs, err)
		}
		if h.t.Failed() {
			h.t.Logf("containerd e2e: harness %s%s", h.NetNS, h.logTail(60))
		}
		errs = append(errs, removeAll(h.Dir))
		if err := errors.Join(errs...); err != nil {
			h.t.Errorf("containerd e2e: cleanup: %v", err)
		}
	})
}

// restartFile, in a harness's directory, tells the shell running
// containerd to run it again when it exits (Restart).
const restartFile = "restart"

// Restart stops containerd (SIGTERM; SIGKILL after 10s) and starts it
// again on the same config, root, state, sockets (CRI and NRI) and
// namespaces, as a node's containerd restarts: the shims, and so the
// sandboxes and containers, keep running, and containerd recovers them.
// It returns once the CRI plugin reports the runtime and the network
// ready again. Clients from Client reconnect by themselves.
func (h *Harness) Restart(ctx context.Context) error {
	pid, err := h.containerdPID()
	if err != nil {
		return fmt.Errorf("restart containerd: %w", err)
	}
	marker := filepath.Join(h.Dir, restartFile)
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return fmt.Errorf("restart containerd: %w", err)
	}
	gone := func() (bool, error) {
		_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
		return errors.Is(err, fs.ErrNotExist), nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if poll(ctx, gone, 10*time.Second) != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if err := poll(ctx, gone, 10*time.Second); err != nil {
			return fmt.Errorf("restart containerd: process %d still there after SIGKILL: %w", pid, err)
		}
	}
	if err := h.dialReady(ctx); err != nil {
		return fmt.Errorf("restart containerd: %w%s", err, h.logTail(40))
	}
	return nil
}

// Kill kills containerd's process group at once (SIGKILL), as a node
// that loses power: the shell that is PID 1 of its PID namespace dies with
// it, and the kernel kills every shim and container. Nothing is removed:
// the root, state, CNI allocations and the network namespace stay, as on
// a node's disk. Revive starts containerd again on them.
func (h *Harness) Kill(ctx context.Context) error {
	if h.cmd == nil || h.cmd.Process == nil {
		return errors.New("kill containerd: not started")
	}
	_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-h.exited:
	case <-ctx.Done():
		return fmt.Errorf("kill containerd: process group %d still there: %w", h.cmd.Process.Pid, ctx.Err())
	}
	h.release()
	h.release = nil
	return nil
}

// Revive starts containerd again after Kill, in new mount and PID
// namespaces on the same network namespace, config, root and state, as a
// node's containerd boots, and waits until the CRI plugin reports the
// runtime and the network ready. The sandboxes it finds in its state are
// dead; kubelet removes and recreates them.
func (h *Harness) Revive(ctx context.Context) error {
	select {
	case <-h.exited:
	default:
		return errors.New("revive containerd: still running (Kill first)")
	}
	if err := h.launch(); err != nil {
		return err
	}
	if err := h.dialReady(ctx); err != nil {
		return fmt.Errorf("revive containerd: %w%s", err, h.logTail(40))
	}
	return nil
}

// dialReady connects to containerd and waits until its CRI plugin reports
// the runtime and the network ready.
func (h *Harness) dialReady(ctx context.Context) error {
	c, err := Dial(h.Endpoint)
	if err != nil {
		return err
	}
	defer c.Close()
	return h.waitReady(ctx, c)
}

// containerdPID is the running containerd's PID (in the test's PID
// namespace): the child named containerd of the shell that unshare (the
// process Start ran) forked.
func (h *Harness) containerdPID() (int, error) {
	select {
	case <-h.exited:
		return 0, errors.New("containerd has exited")
	default:
	}
	shells, err := children(h.cmd.Process.Pid)
	if err != nil {
		return 0, err
	}
	for sh := range shells {
		kids, err := children(sh)
		if err != nil {
			return 0, err
		}
		for pid, comm := range kids {
			if comm == "containerd" {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no containerd process under %d", h.cmd.Process.Pid)
}

// children maps the PIDs of ppid's child processes to their command names,
// from /proc/*/stat.
func children(ppid int) (map[int]string, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	kids := map[int]string{}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // exited meanwhile
		}
		// "PID (COMM) STATE PPID ...": COMM may hold spaces and parens.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(ppid) {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(s[:open])); err == nil {
			kids[pid] = s[open+1 : end]
		}
	}
	return kids, nil
}

// ownerFile, in a harness's directory, holds "PID NETNS CGROUP-PARENT" of
// the test process that owns it.
const ownerFile = "owner"

// sweepStale removes what harnesses of test processes that died without
// cleaning up left behind: their network namespaces, cgroups and
// directories. Their containerd died with them (see start).
func sweepStale(t testing.TB) {
	owners, _ := filepath.Glob(filepath.Join(os.TempDir(), "dnscfg-e2e-*", ownerFile))
	for _, o := range owners {
		b, err := os.ReadFile(o)
		if err != nil {
			continue
		}
		var pid int
		var netns, cgroup string
		if _, err := fmt.Sscan(string(b), &pid, &netns, &cgroup); err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // owner alive
		}
		dir := filepath.Dir(o)
		t.Logf("containerd e2e: sweeping harness %s left by dead process %d", dir, pid)
		var errs []error
		errs = append(errs, removeCgroups(cgroup))
		if strings.HasPrefix(netns, "dnscfg-e2e-") {
			if _, err := os.Stat(filepath.Join("/run/netns", netns)); err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := output(ctx, "ip", "netns", "del", netns)
				cancel()
				errs = append(errs, err)
			}
		}
		errs = append(errs, removeAll(dir))
		if err := errors.Join(errs...); err != nil {
			t.Logf("containerd e2e: sweep %s: %v", dir, err)
		}
	}
}

// removeSandboxes stops and removes every pod sandbox, which stops and
// removes their containers and releases their CNI addresses.
func (h *Harness) removeSandboxes() error {
	select {
	case <-h.exited:
		return nil
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(h.Endpoint)
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range resp.GetItems() {
		errs = append(errs, c.RemovePod(ctx, sb.Id))
	}
	return errors.Join(errs...)
}

// stopContainerd signals containerd's process group and waits. Once
// containerd exits, the shell that is PID 1 of its PID namespace exits
// too, which takes every shim and container with it, and the last of them
// takes the private mount namespace and its mounts.
func (h *Harness) stopContainerd() error {
	pgid := h.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-h.exited:
		return nil
	case <-time.After(10 * time.Second):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-h.exited:
		return fmt.Errorf("containerd did not stop on SIGTERM within 10s; killed")
	case <-time.After(10 * time.Second):
		return fmt.Errorf("containerd process group %d did not exit after SIGKILL", pgid)
	}
}

// removeCgroups removes the cgroup directory parent, and everything under
// it, from every cgroup hierarchy mounted under /sys/fs/cgroup, killing any
// process still in it first.
func removeCgroups(parent string) error {
	if parent == "" {
		return nil
	}
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	var errs []error
	for _, root := range roots {
		top := filepath.Join(root, parent)
		if _, err := os.Stat(top); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		// Deepest first: a cgroup goes only once it has no children.
		for i := len(dirs) - 1; i >= 0; i-- {
			if procs, err := os.ReadFile(filepath.Join(dirs[i], "cgroup.procs")); err == nil {
				for _, f := range strings.Fields(string(procs)) {
					var pid int
					if _, err := fmt.Sscan(f, &pid); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			err := poll(context.Background(), func() (bool, error) {
				err := syscall.Rmdir(dirs[i])
				return err == nil || errors.Is(err, syscall.ENOENT), nil
			}, 5*time.Second)
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %q: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// unmountTree unmounts dir and every mount under it, deepest first.
func unmountTree(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := output(ctx, "umount", "--recursive", dir)
	return err
}

// removeAll removes dir, retrying briefly: a mount namespace's mounts may
// outlive its last process for a moment.
func removeAll(dir string) error {
	var last error
	err := poll(context.Background(), func() (bool, error) {
		last = os.RemoveAll(dir)
		return last == nil, nil
	}, 10*time.Second)
	if err != nil {
		return fmt.Errorf("remove %q: %w (%v)", dir, err, last)
	}
	return nil
}

// poll calls cond every 20ms (backing off to 200ms) until it returns true
// or an error, ctx ends, or the optional timeout passes.
func poll(ctx context.Context, cond func() (bool, error), timeout ...time.Duration) error {
	if len(timeout) > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout[0])
		defer cancel()
	}
	delay := 20 * time.Millisecond
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		if delay < 200*time.Millisecond {
			delay *= 2
		}
	}
}

// output runs a command and returns its trimmed stdout, or an error with
// its stderr.
func output(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
