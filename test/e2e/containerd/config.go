package containerd

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// paths are the per-harness locations rendered into containerd's config.
type paths struct {
	root, state, socket, runcRoot, opt string
	cniConfDir, cniBinDir, ipamDir     string
	// nriSocket and nriDir: containerd 2.x's NRI socket and plugin
	// directories (version 3 config only).
	nriSocket, nriDir string
	// registryDir is the CRI plugin's registry config_path (hosts.toml
	// per registry host); "" sets none.
	registryDir string
}

// containerdConfig renders a config file in the version 2 schema, the one
// containerd 1.6 and 1.7 (Debian bookworm ships 1.6.20) read; containerd
// 2.x reads it too and migrates it in memory.
func containerdConfig(p paths) string {
	q := strconv.Quote
	var b strings.Builder
	fmt.Fprintf(&b, "version = 2\nroot = %s\nstate = %s\n", q(p.root), q(p.state))
	// Snapshotters that cannot work here only log noise at start.
	b.WriteString(`disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]` + "\n\n")
	fmt.Fprintf(&b, "[grpc]\n  address = %s\n\n", q(p.socket))
	fmt.Fprintf(&b, "[ttrpc]\n  address = %s\n\n", q(p.socket+".ttrpc"))
	b.WriteString("[debug]\n  address = \"\"\n\n[metrics]\n  address = \"\"\n\n")
	fmt.Fprintf(&b, "[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %s\n\n", q(p.opt))
	fmt.Fprintf(&b, `[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %s
  # The machine lacks CAP_SYS_RESOURCE: containers may not get a lower
  # oom_score_adj than containerd itself.
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  # Pod network namespaces are bind-mounted under the state dir, not in the
  # host's /var/run/netns.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  max_container_log_line_size = 16384

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %s
    conf_dir = %s
    max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %s
        SystemdCgroup = false
`, q(PauseImage), q(p.cniBinDir), q(p.cniConfDir), q(p.runcRoot))
	if p.registryDir != "" {
		fmt.Fprintf(&b, "\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = %s\n", q(p.registryDir))
	}
	return b.String()
}

// Network settings of the pod network inside the harness's namespace.
const (
	// BridgeName is the Linux bridge the CNI bridge plugin attaches pods to.
	BridgeName = "dnscfg0"
	// bridgeMAC is the bridge's own, locally administered, MAC address.
	bridgeMAC = "02:00:0a:e9:00:01"
	// cniNetworkName names the CNI network (and host-local's state dir).
	cniNetworkName = "dnscfg-e2e"
)

var (
	// PodSubnet is the pod network. It exists only inside the harness's
	// network namespace, which has no link to anywhere else.
	PodSubnet = netip.MustParsePrefix("10.233.0.0/24")
	// BridgeAddr is the address the harness gives the bridge, so that
	// servers started in the namespace (h.Command, h.Do) can listen on an
	// address the pods reach on-link.
	BridgeAddr = netip.MustParseAddr("10.233.0.1")
)

// cniConfList renders the bridge network: host-local IPAM on subnet (a
// /24; invalid for IPv6 only) and, when valid, subnet6 (an IPv6 /64), no gateway on the bridge from the plugin (the harness sets its first address
// itself), no masquerade, and routes only for the extra prefixes asked for;
// with hostPorts, the portmap plugin after it.
func cniConfList(ipamDir string, subnet, subnet6 netip.Prefix, routes []netip.Prefix, hostPorts bool) ([]byte, error) {
	type route struct {
		Dst string `json:"dst"`
		GW  string `json:"gw,omitempty"`
	}
	type rangeT struct {
		Subnet     string `json:"subnet"`
		RangeStart string `json:"rangeStart"`
		RangeEnd   string `json:"rangeEnd"`
		Gateway    string `json:"gateway"`
	}
	type ipam struct {
		Type    string     `json:"type"`
		DataDir string     `json:"dataDir"`
		Ranges  [][]rangeT `json:"ranges"`
		Routes  []route    `json:"routes,omitempty"`
	}
	type plugin struct {
		Type        string `json:"type"`
		Bridge      string `json:"bridge"`
		IsGateway   bool   `json:"isGateway"`
		IsDefaultGW bool   `json:"isDefaultGateway"`
		IPMasq      bool   `json:"ipMasq"`
		HairpinMode bool   `json:"hairpinMode"`
		IPAM        ipam   `json:"ipam"`
	}
	var ranges [][]rangeT
	gw := netip.Addr{}
	if subnet.IsValid() {
		gw = subnet.Addr().Next()
		base := subnet.Addr().As4()
		host := func(b byte) string { a := base; a[3] = b; return netip.AddrFrom4(a).String() }
		ranges = append(ranges, []rangeT{{Subnet: subnet.String(), RangeStart: host(10), RangeEnd: host(250), Gateway: gw.String()}})
	}
	gw6 := netip.Addr{}
	if subnet6.IsValid() {
		gw6 = subnet6.Addr().Next()
		b := subnet6.Addr().As16()
		b[15] = 0x10
		start := netip.AddrFrom16(b)
		b[15] = 0xfa
		ranges = append(ranges, []rangeT{{Subnet: subnet6.String(), RangeStart: start.String(), RangeEnd: netip.AddrFrom16(b).String(), Gateway: gw6.String()}})
	}
	var rs []route
	for _, r := range routes {
		switch {
		case r.Addr().Is4() && subnet.IsValid():
			rs = append(rs, route{Dst: r.Masked().String(), GW: gw.String()})
		case r.Addr().Is4():
			return nil, fmt.Errorf("route %s: an IPv4 route on a pod network without IPv4", r)
		case gw6.IsValid():
			rs = append(rs, route{Dst: r.Masked().String(), GW: gw6.String()})
		default:
			return nil, fmt.Errorf("route %s: an IPv6 route on a pod network without IPv6", r)
		}
	}
	type portmap struct {
		Type         string          `json:"type"`
		Capabilities map[string]bool `json:"capabilities"`
	}
	conf := struct {
		CNIVersion string `json:"cniVersion"`
		Name       string `json:"name"`
		Plugins    []any  `json:"plugins"`
	}{
		CNIVersion: "1.0.0",
		Name:       cniNetworkName,
		Plugins: []any{plugin{
			Type:        "bridge",
			Bridge:      BridgeName,
			HairpinMode: true,
			IPAM: ipam{
				Type:    "host-local",
				DataDir: ipamDir,
				Ranges:  ranges,
				Routes:  rs,
			},
		}},
	}
	if hostPorts {
		conf.Plugins = append(conf.Plugins, portmap{Type: "portmap", Capabilities: map[string]bool{"portMappings": true}})
	}
	return json.MarshalIndent(conf, "", "  ")
}

// containerdConfigV3 renders the same settings in the version 3 schema of
// containerd 2.x, whose CRI plugin is split into
// io.containerd.cri.v1.images (snapshotter, the pinned sandbox image) and
// io.containerd.cri.v1.runtime (runtimes, CNI, security settings), with
// the streaming server left in io.containerd.grpc.v1.cri. NRI, on by
// default in 2.x, listens on a socket under the harness's directory
// instead of the machine's /var/run/nri.
func containerdConfigV3(p paths) string {
	q := strconv.Quote
	var b strings.Builder
	fmt.Fprintf(&b, "version = 3\nroot = %s\nstate = %s\n", q(p.root), q(p.state))
	b.WriteString(`disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.erofs"]` + "\n\n")
	fmt.Fprintf(&b, "[grpc]\n  address = %s\n\n", q(p.socket))
	fmt.Fprintf(&b, "[ttrpc]\n  address = %s\n\n", q(p.socket+".ttrpc"))
	b.WriteString("[debug]\n  address = \"\"\n\n[metrics]\n  address = \"\"\n\n")
	fmt.Fprintf(&b, "[plugins.'io.containerd.internal.v1.opt']\n  path = %s\n\n", q(p.opt))
	fmt.Fprintf(&b, `[plugins.'io.containerd.nri.v1.nri']
  disable = false
  socket_path = %s
  plugin_path = %s
  plugin_config_path = %s

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"

  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %s

[plugins.'io.containerd.cri.v1.runtime']
  # As in the version 2 config above.
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  netns_mounts_under_state_dir = true
  max_container_log_line_size = 16384

  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%s]
    conf_dir = %s
    max_conf_num = 1

  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"

    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        Root = %s
        SystemdCgroup = false

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, q(p.nriSocket), q(p.nriDir), q(p.nriDir), q(PauseImage), q(p.cniBinDir), q(p.cniConfDir), q(p.runcRoot))
	if p.registryDir != "" {
		fmt.Fprintf(&b, "\n[plugins.'io.containerd.cri.v1.images'.registry]\n  config_path = %s\n", q(p.registryDir))
	}
	return b.String()
}
