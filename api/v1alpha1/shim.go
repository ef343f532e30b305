package v1alpha1

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// ShimKind is the kind of the CRI shim's config file.
const ShimKind = "ShimConfiguration"

// Shim defaults.
const (
	DefaultShimListen          = "/run/dnsconfigurer/cri.sock"
	DefaultShimRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	// DefaultPodLookupTimeout is how long RunPodSandbox waits for a pod
	// the informer has not seen yet.
	DefaultPodLookupTimeout = 2 * time.Second
	// DefaultShimMaxConnections is how many client connections the shim
	// serves at once (containerd itself has no limit; the shim serves
	// fewer when the open-file limit leaves room for fewer).
	DefaultShimMaxConnections = 4096
	// MaxShimMaxConnections bounds maxConnections.
	MaxShimMaxConnections = 1 << 20
)

// Limits and failure policy values of the shim.
const (
	LimitsTrim         = "trim"
	LimitsReject       = "reject"
	FailurePolicyOpen  = "open"
	FailurePolicyClose = "closed"
)

// ResolvConfMode values: what a broken node resolver file does.
const (
	ResolvConfModeLastGood = "last-good"
	ResolvConfModeStrict   = "strict"
)

// Defaults of the shim's choices.
const (
	DefaultLimits         = LimitsTrim
	DefaultFailurePolicy  = FailurePolicyOpen
	DefaultResolvConfMode = ResolvConfModeLastGood
)

// ShimConfiguration is the config file of `dnsconfigurer shim`; flags
// override it:
//
//	apiVersion: dnsconfigurer.io/v1alpha1
//	kind: ShimConfiguration
//	clusterDNS: [10.96.0.10]
//	clusterDomain: cluster.local
//	resolvConf: /etc/resolv.conf
//	nodeLocalDNS: [169.254.20.10]
//	listen: /run/dnsconfigurer/cri.sock
//	runtimeEndpoint: unix:///run/containerd/containerd.sock
//	nodeName: node-1          # with an API server
//	kubeconfig: ""            # "" and in a pod: in-cluster config
//	limits: trim
//	failurePolicy: open
//	metricsListen: 127.0.0.1:9310
//	maxConnections: 4096
//	defaultDNSPolicy: ClusterFirst   # or ClusterFirstWithAutopath
//	namespaceLabels: false   # true: read the namespaces' dnsconfigurer.io/dns-policy label
//	ndots: 5                 # unset: kubelet's ndots:5
type ShimConfiguration struct {
	TypeMeta `json:",inline"`
	// NodeAgent is what both node agents take: kubelet's DNS settings, the
	// pod policy, the API server, limits and metrics.
	NodeAgent `json:",inline"`

	// NodeIPs decide the loopback nameserver of host-type pods when
	// resolvConf is "" (kubelet's node IPs).
	NodeIPs []string `json:"nodeIPs,omitempty"`
	// ResolvConfMode is "last-good" (default: a broken file keeps the last
	// good copy) or "strict" (kubelet's behaviour: pods fail while it is
	// broken).
	ResolvConfMode string `json:"resolvConfMode,omitempty"`

	// Listen is the shim's unix socket, kubelet's
	// --container-runtime-endpoint (default /run/dnsconfigurer/cri.sock).
	Listen string `json:"listen,omitempty"`
	// RuntimeEndpoint is containerd's socket (default
	// unix:///run/containerd/containerd.sock).
	RuntimeEndpoint string `json:"runtimeEndpoint,omitempty"`

	// PodLookupTimeout is how long RunPodSandbox waits for a pod the
	// informer has not seen yet, as a Go duration (default "2s").
	PodLookupTimeout Duration `json:"podLookupTimeout,omitempty"`

	// FailurePolicy is "open" (default: on an internal error kubelet's
	// request is forwarded unchanged) or "closed" (the sandbox fails).
	FailurePolicy string `json:"failurePolicy,omitempty"`

	// MaxConnections bounds the client connections (kubelet, crictl,
	// critest) served at once (default 4096, at most 1048576; fewer when
	// the open-file limit leaves room for fewer: two descriptors a
	// connection, 256 kept). A new connection beyond it takes the place of
	// the longest idle one (no call in flight), which is sent GOAWAY and
	// closed; it is refused only when every connection has a call in
	// flight.
	MaxConnections int `json:"maxConnections,omitempty"`
}

// SetDefaults fills unset fields.
func (c *ShimConfiguration) SetDefaults() {
	c.NodeAgent.SetDefaults()
	setString(&c.ResolvConfMode, DefaultResolvConfMode)
	setString(&c.Listen, DefaultShimListen)
	setString(&c.RuntimeEndpoint, DefaultShimRuntimeEndpoint)
	setString(&c.PodLookupTimeout, Duration(DefaultPodLookupTimeout.String()))
	setString(&c.FailurePolicy, DefaultFailurePolicy)
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultShimMaxConnections
	}
}

// Validate reports the first invalid field by name.
func (c *ShimConfiguration) Validate() error {
	if err := c.validPolicy(); err != nil {
		return err
	}
	for i, ip := range c.NodeIPs {
		if _, err := netip.ParseAddr(ip); err != nil {
			return fmt.Errorf("nodeIPs[%d]: %q is not an IP address", i, ip)
		}
	}
	if err := either("resolvConfMode", c.ResolvConfMode, ResolvConfModeLastGood, ResolvConfModeStrict); err != nil {
		return err
	}
	if err := socketPath(c.Listen); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if err := socketPath(c.RuntimeEndpoint); err != nil {
		return fmt.Errorf("runtimeEndpoint: %w", err)
	}
	if strings.TrimPrefix(c.Listen, "unix://") == strings.TrimPrefix(c.RuntimeEndpoint, "unix://") {
		return fmt.Errorf("listen: %q is the runtime endpoint itself", c.Listen)
	}
	if _, err := c.PodLookupTimeout.within(0, time.Minute); err != nil {
		return fmt.Errorf("podLookupTimeout: %w", err)
	}
	if err := either("failurePolicy", c.FailurePolicy, FailurePolicyOpen, FailurePolicyClose); err != nil {
		return err
	}
	if err := c.validAgent(); err != nil {
		return err
	}
	if c.MaxConnections < 1 || c.MaxConnections > MaxShimMaxConnections {
		return fmt.Errorf("maxConnections: %d must be between 1 and %d", c.MaxConnections, MaxShimMaxConnections)
	}
	return nil
}

// socketPath accepts an absolute path or a unix:// URL of one.
func socketPath(s string) error {
	p := s
	if rest, ok := strings.CutPrefix(s, "unix://"); ok {
		p = rest
	} else if strings.Contains(s, "://") {
		return fmt.Errorf("%q: only unix sockets are supported", s)
	}
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("%q: want an absolute socket path or unix:///path", s)
	}
	if len(p) > 107 {
		return fmt.Errorf("%q: a unix socket path is at most 107 bytes", s)
	}
	return nil
}
