package containerd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Client is a small CRI v1 client for tests: it runs pod sandboxes from a
// PodSpec, starts containers of TestImage, and reads what the containers
// see. The raw Runtime and Images clients are there for everything else.
type Client struct {
	Runtime runtimeapi.RuntimeServiceClient
	Images  runtimeapi.ImageServiceClient
	// LogRoot is the directory under which each pod gets its log
	// directory; empty means containers are not logged.
	LogRoot string
	// CgroupParent is used for sandboxes whose PodSpec sets none.
	CgroupParent string

	conn *grpc.ClientConn
}

// Dial returns a client for endpoint, a socket path or a unix:// URL. It
// does not connect until the first call.
func Dial(endpoint string) (*Client, error) {
	target := endpoint
	if !strings.HasPrefix(target, "unix:") {
		target = "unix://" + endpoint
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %q: %w", endpoint, err)
	}
	return &Client{
		Runtime: runtimeapi.NewRuntimeServiceClient(conn),
		Images:  runtimeapi.NewImageServiceClient(conn),
		conn:    conn,
	}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// PodSpec is the part of a pod that a sandbox config is made from.
type PodSpec struct {
	Name      string
	Namespace string // "default" when empty
	UID       string // random when empty
	Attempt   uint32
	// HostNetwork puts the sandbox in containerd's network namespace (the
	// harness's: loopback and the bridge with BridgeAddr), as kubelet does
	// for hostNetwork pods. Leave Hostname empty then: with containerd 1.6
	// and runc 1.1 RunPodSandbox fails with "unable to set hostname without
	// a private UTS namespace"; the pod gets the machine's hostname.
	HostNetwork bool
	Hostname    string
	DNS         *runtimeapi.DNSConfig
	Labels      map[string]string
	Annotations map[string]string
	// CgroupParent defaults to the client's.
	CgroupParent string
}

// Pod is a running sandbox and the config it was started with.
type Pod struct {
	ID     string
	Config *runtimeapi.PodSandboxConfig
}

// Container is a started container of a pod.
type Container struct {
	ID   string
	Name string
	Pod  *Pod
	// LogPath is the host path of its CRI log, "" when not logged.
	LogPath string
}

// ExecResult is the outcome of Exec.
type ExecResult struct {
	Stdout, Stderr []byte
	ExitCode       int32
}

// SandboxConfig builds the PodSandboxConfig kubelet would send for spec,
// as far as DNS, hostname, metadata and namespaces go.
func (c *Client) SandboxConfig(spec PodSpec) *runtimeapi.PodSandboxConfig {
	if spec.Namespace == "" {
		spec.Namespace = "default"
	}
	if spec.UID == "" {
		spec.UID = randomUID()
	}
	if spec.CgroupParent == "" {
		spec.CgroupParent = c.CgroupParent
	}
	netMode := runtimeapi.NamespaceMode_POD
	if spec.HostNetwork {
		netMode = runtimeapi.NamespaceMode_NODE
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: spec.Name, Namespace: spec.Namespace, Uid: spec.UID, Attempt: spec.Attempt,
		},
		Hostname:    spec.Hostname,
		DnsConfig:   spec.DNS,
		Labels:      spec.Labels,
		Annotations: spec.Annotations,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: spec.CgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{
					Network: netMode,
					Pid:     runtimeapi.NamespaceMode_CONTAINER,
					Ipc:     runtimeapi.NamespaceMode_POD,
				},
			},
		},
	}
	if c.LogRoot != "" {
		cfg.LogDirectory = filepath.Join(c.LogRoot, spec.Namespace+"_"+spec.Name+"_"+spec.UID)
	}
	return cfg
}

// RunPod runs a sandbox for spec.
func (c *Client) RunPod(ctx context.Context, spec PodSpec) (*Pod, error) {
	return c.RunPodConfig(ctx, c.SandboxConfig(spec))
}

// RunPodConfig runs a sandbox from a config as is.
func (c *Client) RunPodConfig(ctx context.Context, cfg *runtimeapi.PodSandboxConfig) (*Pod, error) {
	if cfg.LogDirectory != "" {
		if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
			return nil, err
		}
	}
	resp, err := c.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return nil, fmt.Errorf("run sandbox %q: %w", cfg.GetMetadata().GetName(), err)
	}
	return &Pod{ID: resp.PodSandboxId, Config: cfg}, nil
}

// CreateContainer creates (but does not start) a container of TestImage in
// pod, running TestBinary with args ("sleep" when none).
func (c *Client) CreateContainer(ctx context.Context, pod *Pod, name string, args ...string) (*Container, error) {
	if len(args) == 0 {
		args = []string{"sleep"}
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: TestImage},
		Command:  []string{TestBinary},
		Args:     args,
		Labels:   map[string]string{"io.kubernetes.container.name": name},
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				// A container shares the namespaces its sandbox has.
				NamespaceOptions: pod.Config.GetLinux().GetSecurityContext().GetNamespaceOptions(),
			},
		},
	}
	ctr := &Container{Name: name, Pod: pod}
	if pod.Config.GetLogDirectory() != "" {
		cfg.LogPath = name + "_0.log"
		ctr.LogPath = filepath.Join(pod.Config.LogDirectory, cfg.LogPath)
	}
	resp, err := c.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: pod.ID, Config: cfg, SandboxConfig: pod.Config,
	})
	if err != nil {
		return nil, fmt.Errorf("create container %q in sandbox %q: %w", name, pod.ID, err)
	}
	ctr.ID = resp.ContainerId
	return ctr, nil
}

// StartContainer creates and starts a container (see CreateContainer).
func (c *Client) StartContainer(ctx context.Context, pod *Pod, name string, args ...string) (*Container, error) {
	ctr, err := c.CreateContainer(ctx, pod, name, args...)
	if err != nil {
		return nil, err
	}
	if _, err := c.Runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr.ID}); err != nil {
		return nil, fmt.Errorf("start container %q: %w", ctr.ID, err)
	}
	return ctr, nil
}

// StartResolvConf starts a container (StartContainer) and returns it with
// its /etc/resolv.conf.
func (c *Client) StartResolvConf(ctx context.Context, pod *Pod, name string) (*Container, string, error) {
	ctr, err := c.StartContainer(ctx, pod, name)
	if err != nil {
		return nil, "", err
	}
	got, err := c.ResolvConf(ctx, ctr.ID)
	return ctr, got, err
}

// Exec runs cmd in a running container with ExecSync; a non-zero exit is
// not an error, a failure to run is.
func (c *Client) Exec(ctx context.Context, containerID string, cmd ...string) (ExecResult, error) {
	timeout := int64(30)
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(int64(time.Until(dl).Seconds()), 1)
	}
	resp, err := c.Runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: cmd, Timeout: timeout})
	if err != nil {
		return ExecResult{}, fmt.Errorf("exec %q in %q: %w", cmd, containerID, err)
	}
	return ExecResult{Stdout: resp.Stdout, Stderr: resp.Stderr, ExitCode: resp.ExitCode}, nil
}

// Testbin runs TestBinary with args in a running container and returns its
// stdout; a non-zero exit is an error carrying its stderr.
func (c *Client) Testbin(ctx context.Context, containerID string, args ...string) (string, error) {
	r, err := c.Exec(ctx, containerID, append([]string{TestBinary}, args...)...)
	if err != nil {
		return "", err
	}
	if r.ExitCode != 0 {
		return string(r.Stdout), fmt.Errorf("testbin %q in %q: exit %d: %s", args, containerID, r.ExitCode, bytes.TrimSpace(r.Stderr))
	}
	return string(r.Stdout), nil
}

// ResolvConf returns the container's /etc/resolv.conf.
func (c *Client) ResolvConf(ctx context.Context, containerID string) (string, error) {
	return c.Testbin(ctx, containerID, "resolv")
}

// Hostname returns the container's kernel hostname.
func (c *Client) Hostname(ctx context.Context, containerID string) (string, error) {
	out, err := c.Testbin(ctx, containerID, "hostname")
	return strings.TrimSpace(out), err
}

// WaitExit waits until the container has exited and returns its exit code.
func (c *Client) WaitExit(ctx context.Context, containerID string) (int32, error) {
	var code int32
	err := poll(ctx, func() (bool, error) {
		resp, err := c.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID})
		if err != nil {
			return false, fmt.Errorf("status of container %q: %w", containerID, err)
		}
		code = resp.GetStatus().GetExitCode()
		return resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED, nil
	})
	return code, err
}

// Logs returns what the container wrote to stdout and stderr so far, read
// from its CRI log file.
func (c *Client) Logs(ctr *Container) (stdout, stderr string, err error) {
	if ctr.LogPath == "" {
		return "", "", fmt.Errorf("container %q is not logged (no LogRoot)", ctr.ID)
	}
	f, err := os.Open(ctr.LogPath)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	return parseCRILog(f)
}

// parseCRILog reads the CRI log format, one "TIME STREAM TAG CONTENT" line
// per entry, where TAG F ends a line and P continues it.
func parseCRILog(r *os.File) (stdout, stderr string, err error) {
	var out, errb strings.Builder
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), " ", 4)
		if len(parts) < 3 {
			continue
		}
		content := ""
		if len(parts) == 4 {
			content = parts[3]
		}
		if parts[2] == "F" {
			content += "\n"
		}
		if parts[1] == "stderr" {
			errb.WriteString(content)
		} else {
			out.WriteString(content)
		}
	}
	return out.String(), errb.String(), sc.Err()
}

// StopContainer stops a container, giving it timeout seconds after SIGTERM.
func (c *Client) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	if _, err := c.Runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: containerID, Timeout: timeout}); err != nil {
		return fmt.Errorf("stop container %q: %w", containerID, err)
	}
	return nil
}

// RemoveContainer removes a container, stopping it first if needed.
func (c *Client) RemoveContainer(ctx context.Context, containerID string) error {
	if _, err := c.Runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: containerID}); err != nil {
		return fmt.Errorf("remove container %q: %w", containerID, err)
	}
	return nil
}

// StopPod stops a sandbox and its containers and tears down its network.
func (c *Client) StopPod(ctx context.Context, podID string) error {
	if _, err := c.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podID}); err != nil {
		return fmt.Errorf("stop sandbox %q: %w", podID, err)
	}
	return nil
}

// RemovePod stops and removes a sandbox and its containers.
func (c *Client) RemovePod(ctx context.Context, podID string) error {
	if err := c.StopPod(ctx, podID); err != nil {
		return err
	}
	if _, err := c.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podID}); err != nil {
		return fmt.Errorf("remove sandbox %q: %w", podID, err)
	}
	return nil
}

// ResolvConfFor renders dns the way containerd writes a sandbox's
// resolv.conf from the CRI DNSConfig: a search line, one nameserver line
// per server, and an options line, each only when non-empty. A nil or
// empty config makes containerd copy the host's file instead; then this
// returns "".
func ResolvConfFor(dns *runtimeapi.DNSConfig) string {
	var b strings.Builder
	if len(dns.GetSearches()) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(dns.GetSearches(), " "))
	}
	for _, s := range dns.GetServers() {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(dns.GetOptions()) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(dns.GetOptions(), " "))
	}
	return b.String()
}

// randomUID returns a random RFC 4122 version 4 UID, as pods have.
func randomUID() string {
	h := randomHex(16)
	b := []byte(h)
	b[12] = '4'
	b[16] = "89ab"[b[16]%4]
	return string(b[0:8]) + "-" + string(b[8:12]) + "-" + string(b[12:16]) + "-" + string(b[16:20]) + "-" + string(b[20:32])
}
