package podfacts

import (
	"errors"
	"fmt"
	"os"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// HostOf is the engine's view of a node resolver snapshot: the config as
// kubelet reads the file (Raw, loopback nameservers included; the engine
// applies the loopback rule itself), with where each part was read.
//
// Err is set only when there is no usable config (Strict mode while the
// file is broken, or no good read yet); it fails the sandbox as kubelet
// would. A problem while a last-good config is served does not.
func HostOf(s hostresolv.Snapshot) policy.Host {
	switch {
	case s.Err != nil:
		return policy.Host{Err: fmt.Errorf("%s: %w", s.Path, s.Err)}
	case s.Disabled:
		return policy.Host{Disabled: true}
	}
	h := policy.HostOf(s.Raw)
	h.Lines = s.Lines
	return h
}

// ReadHost reads the node resolver file at path once, as kubelet's
// getHostDNSConfig does for the node OS: the node render, validate and
// demo assume. Problems are returned in Host.Err, because kubelet turns
// them into a failure of every pod rather than of its own start-up.
func ReadHost(path, nodeOS string) policy.Host {
	if path == "" {
		return policy.Host{Disabled: true}
	}
	if nodeOS == v1alpha1.NodeOSWindows {
		st, err := os.Stat(path)
		switch {
		case err == nil && st.Mode().IsRegular():
		case path == "Host":
			return policy.Host{Err: errors.New(`resolvConf "Host" reads the Windows network settings (GetNetworkParams and the Tcpip SearchList registry values), which cannot be read here; pass the path of a file holding the node's nameservers and search suffixes instead`)}
		default:
			return policy.Host{Err: fmt.Errorf(`Unexpected resolver config value: %q. Expected "", "Host", or a path to an existing resolv.conf file.`, path)}
		}
	}
	cfg, lines, err := resolvconf.ParseFileLines(path)
	if err != nil {
		return policy.Host{Err: err}
	}
	h := policy.HostOf(cfg)
	h.Lines = lines
	return h
}
