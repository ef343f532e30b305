package policy

import (
	"slices"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// Output is a pod resolver config as kubelet hands it to the runtime (the
// CRI PodSandboxConfig.dns_config): what Compute returns for a pod without
// the autopath annotation.
type Output struct {
	Nameservers []string
	Searches    []string
	Options     []string
}

// Recover is Compute's inverse for the CRI path, where only kubelet's
// output reaches the runtime: dnsPolicy and spec.dnsConfig are not in a
// sandbox config. in carries what the sandbox does say (identity,
// HostNetwork, PolicyAnnotation, hostname); Recover fills in Policy and
// DNSConfig so that Compute, with the autopath annotation ignored as
// kubelet ignores it, gives back out exactly for host.
//
// It tries kubelet's two shapes in order, each as a base Compute itself
// builds for this node and host: cluster (ClusterFirst, or
// ClusterFirstWithHostNet on a host-network sandbox) and host (Default).
// out must extend the base the way kubelet extends it with a pod's
// dnsConfig (servers and searches appended after the base, duplicates
// omitted, then trimmed to the limits; options merged by name), and the
// candidate must reproduce out. ok reports such a shape. Otherwise the
// result is policy None with out as the pod's dnsConfig, which reproduces
// out too; the engine then cannot move the pod onto autopath or a changed
// host config.
//
// Blind spots, by construction: a pod entry equal to a base entry was
// deduplicated away and is not recovered (recomputing gives the same
// output); a None pod whose dnsConfig equals a shape's output is taken for
// that shape.
func (e *Engine) Recover(in Input, out Output, host Host) (Input, bool) {
	in.DNSConfig = nil
	if host.Err == nil {
		for _, p := range []Policy{ClusterFirst, Default} {
			if p == ClusterFirst && in.HostNetwork {
				p = ClusterFirstWithHostNet
			}
			if cand, ok := e.recoverAs(in, p, out, host); ok {
				return cand, true
			}
		}
	}
	in.Policy = None
	in.DNSConfig = &DNSConfig{Nameservers: out.Nameservers, Searches: out.Searches}
	for _, o := range out.Options {
		in.DNSConfig.Options = append(in.DNSConfig.Options, parseOption(o))
	}
	return in, false
}

// recoverAs recovers out as an extension of policy p's base and checks
// the candidate reproduces out.
func (e *Engine) recoverAs(in Input, p Policy, out Output, host Host) (Input, bool) {
	in.Policy = p
	kubelet := in
	kubelet.PolicyAnnotation = ""
	base := e.resolver(kubelet, host)
	if p != Default && base.Type != TypeCluster {
		return in, false // no cluster DNS: the pod would be host-type
	}
	servers, ok := extension(out.Nameservers, base.Nameservers)
	if !ok {
		return in, false
	}
	searches, ok := extension(out.Searches, base.Searches)
	if !ok {
		return in, false
	}
	options, ok := optionExtension(out.Options, base.Options)
	if !ok {
		return in, false
	}
	// Without pod entries the pod may still have had an empty dnsConfig,
	// which makes kubelet deduplicate the base and normalise its options.
	candidates := []*DNSConfig{nil, {}}
	if len(servers) > 0 || len(searches) > 0 || len(options) > 0 {
		candidates = []*DNSConfig{{Nameservers: servers, Searches: searches, Options: options}}
	}
	for _, c := range candidates {
		kubelet.DNSConfig = c
		got := e.resolver(kubelet, host)
		if slices.Equal(got.Nameservers, out.Nameservers) && slices.Equal(got.Searches, out.Searches) && slices.Equal(got.Options, out.Options) {
			in.DNSConfig = c
			return in, true
		}
	}
	return in, false
}

// extension returns what out adds after base, where kubelet built out as
// base followed by pod entries with duplicates omitted (base's own
// duplicates collapse too once a pod has a dnsConfig) and then trimmed from
// the end. A base trimmed away entirely by the limits leaves no pod entries.
func extension(out, base []string) ([]string, bool) {
	bases := [][]string{base, omitDuplicates(slices.Clone(base))}
	for _, b := range bases {
		if len(out) >= len(b) && slices.Equal(out[:len(b)], b) {
			return out[len(b):], true
		}
	}
	for _, b := range bases {
		if len(out) < len(b) && slices.Equal(b[:len(out)], out) {
			return nil, true
		}
	}
	return nil, false
}

// optionExtension returns the pod options that turn base into out by
// kubelet's merge: base names keep their positions (a different value there
// is a pod override), further options are the pod's.
func optionExtension(out, base []string) ([]Option, bool) {
	if len(out) < len(base) {
		return nil, false
	}
	var pod []Option
	for i, b := range base {
		if resolvconf.OptionName(out[i]) != resolvconf.OptionName(b) {
			return nil, false
		}
		if resolvconf.NormalizeOption(out[i]) != resolvconf.NormalizeOption(b) {
			pod = append(pod, parseOption(out[i]))
		}
	}
	for _, o := range out[len(base):] {
		pod = append(pod, parseOption(o))
	}
	return pod, true
}

// parseOption splits a resolver option "name:value" as kubelet's merge does.
func parseOption(o string) Option {
	name, value, ok := strings.Cut(o, ":")
	if !ok {
		return Option{Name: name}
	}
	return Option{Name: name, Value: &value}
}
