package cri

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// HostConfig is the node resolver config the shim reads on every sandbox:
// the last-good snapshot of a hostresolv.Watcher, never a file read.
type HostConfig interface {
	Current() hostresolv.Snapshot
}

// HostFromSnapshot is the engine's view of a watcher snapshot. Err is set
// only when there is no usable config (strict mode while the file is
// broken, or no good read yet); it fails the sandbox as kubelet would. A
// problem while a last-good config is served does not.
func HostFromSnapshot(s hostresolv.Snapshot) policy.Host {
	switch {
	case s.Err != nil:
		return policy.Host{Err: fmt.Errorf("%s: %w", s.Path, s.Err)}
	case s.Disabled:
		return policy.Host{Disabled: true}
	}
	c := s.Config
	return policy.Host{Nameservers: c.Nameservers, Searches: c.Searches, Options: c.Options}
}

// errNoDNSConfig marks a sandbox config without dns_config: kubelet always
// sends one, so the request comes from another client (crictl, a test) and
// is forwarded as it is.
var errNoDNSConfig = errors.New("cri: sandbox config has no dns_config")

// badRequestError is a sandbox config the shim cannot read.
type badRequestError struct{ field, problem string }

func (e *badRequestError) Error() string {
	return fmt.Sprintf("RunPodSandboxRequest.%s: %s", e.field, e.problem)
}

// podIdentity checks the sandbox metadata the shim needs.
func podIdentity(cfg *runtimeapi.PodSandboxConfig) (name, namespace, uid string, err error) {
	if cfg == nil {
		return "", "", "", &badRequestError{"config", "missing"}
	}
	md := cfg.GetMetadata()
	if md == nil {
		return "", "", "", &badRequestError{"config.metadata", "missing"}
	}
	if md.GetName() == "" {
		return "", "", "", &badRequestError{"config.metadata.name", "empty"}
	}
	if md.GetUid() == "" {
		return "", "", "", &badRequestError{"config.metadata.uid", "empty"}
	}
	return md.GetName(), md.GetNamespace(), md.GetUid(), nil
}

// hostNetwork reports a sandbox in the node's network namespace
// (hostNetwork: true).
func hostNetwork(cfg *runtimeapi.PodSandboxConfig) bool {
	return cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
}

// FromSandbox builds the engine input from a sandbox config alone, for a
// pod the API server did not give (no API server, or not seen in time).
//
// The pod's identity comes from the metadata, hostNetwork from the network
// namespace mode (NODE), the autopath selection from the pod annotations
// kubelet copies into the config. dnsPolicy and spec.dnsConfig are not in
// the config; kubelet's own dns_config is the base they are recovered from:
//
//   - When it has the cluster shape for this node (the node's cluster DNS
//     servers first, then "<ns>.svc.<domain> svc.<domain> <domain>" when
//     there is a cluster domain, and an ndots option), the policy is
//     ClusterFirst (ClusterFirstWithHostNet for a host-network sandbox) and
//     the pod's own dnsConfig is what follows: servers after the cluster
//     DNS, searches after the cluster and host searches, options other than
//     ndots:5. The engine then recomputes it with the shim's host resolver
//     config, or switches it to autopath when the annotation asks.
//   - Otherwise kubelet's config is kept as it is: the policy is None with
//     kubelet's config as the pod's dnsConfig.
//
// kubelet's sandbox hostname is kept (HostnameOverride), because the pod's
// hostname fields are not in the config.
//
// The recovery has one blind spot: a pod search or nameserver equal to a
// cluster or host entry was deduplicated away by kubelet, so it cannot be
// told apart. For ClusterFirst this changes nothing (the engine would
// deduplicate it again); an autopath pod loses that entry. And a None pod
// whose dnsConfig equals ClusterFirst's output is taken for ClusterFirst, so
// an autopath annotation on it is honoured (the API path ignores it for
// None). The API server path has no such gap. host is the shim's resolver
// config, used to tell the host searches from the pod's.
func FromSandbox(cfg *runtimeapi.PodSandboxConfig, eng *policy.Engine, host policy.Host) (policy.Input, error) {
	name, namespace, uid, err := podIdentity(cfg)
	if err != nil {
		return policy.Input{}, err
	}
	dns := cfg.GetDnsConfig()
	if dns == nil {
		return policy.Input{}, errNoDNSConfig
	}
	in := policy.Input{
		Name:             name,
		Namespace:        namespace,
		UID:              uid,
		PolicyAnnotation: cfg.GetAnnotations()[policy.AnnotationDNSPolicy],
		HostNetwork:      hostNetwork(cfg),
	}
	if h := cfg.GetHostname(); h != "" && !in.HostNetwork {
		in.HostnameOverride = &h
	}
	node := eng.Node()
	servers, searches, options := dns.GetServers(), dns.GetSearches(), dns.GetOptions()
	var clusterSearches []string
	if d := node.ClusterDomain; d != "" {
		clusterSearches = []string{namespace + ".svc." + d, "svc." + d, d}
	}
	clusterDNS := eng.ClusterDNS()
	if len(clusterDNS) > 0 && hasPrefix(servers, clusterDNS) && hasPrefix(searches, clusterSearches) && hasOption(options, "ndots") &&
		hostSearchesFollow(searches, clusterSearches, host.Searches) {
		in.Policy = policy.ClusterFirst
		if in.HostNetwork {
			in.Policy = policy.ClusterFirstWithHostNet
		}
		pod := &policy.DNSConfig{
			Nameservers: servers[len(clusterDNS):],
			Searches:    without(searches[len(clusterSearches):], host.Searches),
		}
		for _, o := range options {
			if o != "ndots:5" {
				pod.Options = append(pod.Options, parseOption(o))
			}
		}
		if len(pod.Nameservers) > 0 || len(pod.Searches) > 0 || len(pod.Options) > 0 {
			in.DNSConfig = pod
		}
		return in, nil
	}
	in.Policy = policy.None
	pod := &policy.DNSConfig{Nameservers: servers, Searches: searches}
	for _, o := range options {
		pod.Options = append(pod.Options, parseOption(o))
	}
	in.DNSConfig = pod
	return in, nil
}

// hostSearchesFollow reports whether kubelet's search list continues after
// the cluster searches with the node's host searches, as kubelet builds it
// for ClusterFirst (duplicates of the cluster searches omitted). A None pod
// whose dnsConfig merely looks like ClusterFirst lacks them. A list cut
// short by kubelet's limits (32 entries, 2048 characters) may end inside
// them.
func hostSearchesFollow(searches, cluster, hostSearches []string) bool {
	var expect []string
	for _, h := range without(hostSearches, cluster) {
		if !slices.Contains(expect, h) {
			expect = append(expect, h)
		}
	}
	rest := searches[len(cluster):]
	if hasPrefix(rest, expect) {
		return true
	}
	if !hasPrefix(expect, rest) {
		return false
	}
	// rest is a strict prefix of the host searches: only a trimmed list.
	next := expect[len(rest)]
	joined := len(strings.Join(searches, " "))
	return len(searches) >= policy.MaxSearchPaths || joined+1+len(next) > policy.MaxSearchListChars || len(next) > policy.MaxSearchLength
}

func hasPrefix(s, prefix []string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i, p := range prefix {
		if s[i] != p {
			return false
		}
	}
	return true
}

func hasOption(opts []string, name string) bool {
	for _, o := range opts {
		if hostresolv.OptionName(o) == name {
			return true
		}
	}
	return false
}

// without returns s minus the entries in drop, in order, as a new slice.
func without(s, drop []string) []string {
	var out []string
next:
	for _, v := range s {
		for _, d := range drop {
			if v == d {
				continue next
			}
		}
		out = append(out, v)
	}
	return out
}

// parseOption splits a resolver option "name:value" as kubelet's merge does.
func parseOption(o string) policy.Option {
	name, value, ok := strings.Cut(o, ":")
	if !ok {
		return policy.Option{Name: name}
	}
	return policy.Option{Name: name, Value: &value}
}
