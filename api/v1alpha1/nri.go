package v1alpha1

import (
	"fmt"
	"strings"
	"time"
)

// NRIKind is the kind of the NRI plugin's config file.
const NRIKind = "NRIConfiguration"

// NRI plugin defaults.
const (
	DefaultNRISocket      = "/var/run/nri/nri.sock"
	DefaultNRIPluginName  = "dnsconfigurer"
	DefaultNRIPluginIndex = "10"
	DefaultNRIStateDir    = "/run/dnsconfigurer/nri"
	// DefaultNRIPodLookupTimeout stays under NRI's 2s request timeout.
	DefaultNRIPodLookupTimeout = time.Second
)

// NRIConfiguration is the config file of `dnsconfigurer nri`; flags
// override it:
//
//	apiVersion: dnsconfigurer.io/v1alpha1
//	kind: NRIConfiguration
//	clusterDNS: [10.96.0.10]
//	clusterDomain: cluster.local
//	resolvConf: /etc/resolv.conf
//	nodeLocalDNS: [169.254.20.10]
//	socket: /var/run/nri/nri.sock
//	pluginName: dnsconfigurer
//	pluginIndex: "10"
//	stateDir: /run/dnsconfigurer/nri
//	nodeName: node-1          # with an API server
//	kubeconfig: ""            # "" and in a pod: in-cluster config
//	limits: trim
//	metricsListen: 127.0.0.1:9311
//	defaultDNSPolicy: ClusterFirst   # or ClusterFirstWithAutopath
//	namespaceLabels: false   # true: read the namespaces' dnsconfigurer.io/dns-policy label
//	ndots: 5                 # unset: kubelet's ndots:5
type NRIConfiguration struct {
	TypeMeta `json:",inline"`
	// NodeAgent is what both node agents take: kubelet's DNS settings, the
	// pod policy, the API server, limits and metrics.
	NodeAgent `json:",inline"`

	// Socket is the runtime's NRI socket (default /var/run/nri/nri.sock).
	Socket string `json:"socket,omitempty"`
	// PluginName and PluginIndex make the plugin's registered name
	// "<index>-<name>" (default "10-dnsconfigurer"); the index is two
	// digits and orders the plugins of a runtime.
	PluginName  string `json:"pluginName,omitempty"`
	PluginIndex string `json:"pluginIndex,omitempty"`
	// StateDir holds a directory per pod UID with the pod's resolv.conf
	// (default /run/dnsconfigurer/nri).
	StateDir string `json:"stateDir,omitempty"`

	// PodLookupTimeout is how long a container waits for a pod the
	// informer has not seen yet (default "1s"; NRI's request timeout is
	// 2s by default).
	PodLookupTimeout Duration `json:"podLookupTimeout,omitempty"`
}

// SetDefaults fills unset fields.
func (c *NRIConfiguration) SetDefaults() {
	c.NodeAgent.SetDefaults()
	setString(&c.Socket, DefaultNRISocket)
	setString(&c.PluginName, DefaultNRIPluginName)
	setString(&c.PluginIndex, DefaultNRIPluginIndex)
	setString(&c.StateDir, DefaultNRIStateDir)
	setString(&c.PodLookupTimeout, Duration(DefaultNRIPodLookupTimeout.String()))
}

// Validate reports the first invalid field by name.
func (c *NRIConfiguration) Validate() error {
	if err := c.validPolicy(); err != nil {
		return err
	}
	if err := socketPath(c.Socket); err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	if c.PluginName == "" || strings.Trim(c.PluginName, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-") != "" {
		return fmt.Errorf("pluginName: %q must be letters, digits and _.+-", c.PluginName)
	}
	if len(c.PluginIndex) != 2 || strings.Trim(c.PluginIndex, "0123456789") != "" {
		return fmt.Errorf("pluginIndex: %q must be two digits", c.PluginIndex)
	}
	if !strings.HasPrefix(c.StateDir, "/") {
		return fmt.Errorf("stateDir: %q must be an absolute path", c.StateDir)
	}
	if _, err := c.PodLookupTimeout.within(0, 10*time.Second); err != nil {
		return fmt.Errorf("podLookupTimeout: %w", err)
	}
	return c.validAgent()
}
