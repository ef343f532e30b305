package nodesettings

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// Path is where an agent serves its Settings.
const Path = "/node-settings"

// The agent kinds.
const (
	KindShim = "shim"
	KindNRI  = "nri"
)

// Settings are the effective settings of a node agent: what its policy
// engine computes each pod's DNS from.
type Settings struct {
	// Kind is the agent: "shim" or "nri".
	Kind string `json:"kind"`
	// Version is the agent's build (internal/version).
	Version  string `json:"version"`
	NodeName string `json:"nodeName,omitempty"`
	// ClusterDNS, ClusterDomain, NodeLocalDNS and NodeOS are the agent's
	// NodeDNS (kubelet's settings).
	ClusterDNS    []string `json:"clusterDNS"`
	ClusterDomain string   `json:"clusterDomain"`
	NodeLocalDNS  []string `json:"nodeLocalDNS"`
	NodeOS        string   `json:"nodeOS"`
	// NodeIPs are the shim's --node-ip (resolvConf "" only).
	NodeIPs []string `json:"nodeIPs,omitempty"`
	// Limits is trim or reject.
	Limits string `json:"limits"`
	// PodPolicy is the cluster's pod DNS policy as the agent applies it.
	PodPolicy v1alpha1.PodPolicy `json:"podPolicy"`
	// Host is the node resolver config the agent uses now.
	Host Host `json:"host"`
}

// Host is a hostresolv.Snapshot: the node resolver file as parsed
// (loopback nameservers included, as kubelet reads it; the engine applies
// the loopback rule itself).
type Host struct {
	Path       string `json:"path"`
	Disabled   bool   `json:"disabled,omitempty"`
	Generation uint64 `json:"generation"`
	// Healthy is false while the file has a problem (Problem), also when
	// the last good config is still served.
	Healthy bool `json:"healthy"`
	resolvconf.Config
	// Lines are where in the file each part was read.
	Lines   resolvconf.Lines `json:"lines"`
	Problem string           `json:"problem,omitempty"`
	// Error is set when there is no usable config: pods fail on it.
	Error string `json:"error,omitempty"`
}

// HostOf is the Host of a watcher snapshot.
func HostOf(s hostresolv.Snapshot) Host {
	h := Host{Path: s.Path, Disabled: s.Disabled, Generation: s.Generation, Healthy: s.Problem == nil && s.Err == nil,
		Config: s.Raw.Filled(), Lines: s.Lines}
	h.Problem, h.Error = s.Messages()
	return h
}

// Policy is the engine's view of h, as podfacts.HostOf gives it
// to the agent, named by its path for a trace.
func (h Host) Policy() policy.Host {
	var p policy.Host
	switch {
	case h.Error != "":
		p = policy.Host{Err: fmt.Errorf("%s: %w", h.Path, errors.New(h.Error))}
	case h.Disabled:
		p = policy.Host{Disabled: true}
	default:
		p = policy.Host{Nameservers: h.Nameservers, Searches: h.Searches, Options: h.Options, Lines: h.Lines}
	}
	p.Source = h.Path
	return p
}

// NodeDNS is the v1alpha1.NodeDNS of s.
func (s Settings) NodeDNS() v1alpha1.NodeDNS {
	path := s.Host.Path
	domain := s.ClusterDomain
	return v1alpha1.NodeDNS{ClusterDNS: s.ClusterDNS, ClusterDomain: &domain, ResolvConf: &path,
		NodeLocalDNS: s.NodeLocalDNS, NodeOS: s.NodeOS}
}

// Handler serves get's Settings as JSON (lists as [], never null).
func Handler(get func() Settings) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s := get()
		s.ClusterDNS, s.NodeLocalDNS = nonNil(s.ClusterDNS), nonNil(s.NodeLocalDNS)
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(b, '\n'))
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
