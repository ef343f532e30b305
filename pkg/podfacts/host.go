package podfacts

import (
	"fmt"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
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
