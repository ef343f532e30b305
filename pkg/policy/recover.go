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
// kubelet ignores it, gives back out exactly for host; kubelet does not
// apply the loopback rule, so neither does the inverse, and Compute then
// drops the node's loopback servers of a pod off the host network.
//
// It tries kubelet's two shapes in order, each as a base Compute itself
// builds for this node and host: cluster (ClusterFirst, or
// ClusterFirstWithHostNet on a host-network sandbox) and host (Default).
// out must extend the base the way kubelet extends it with a pod's
// dnsConfig (servers and searches appended after the base, duplicates
// omitted, then trimmed to the limits; options merged by key), and the
// candidate must reproduce out (options in any order: kubelet renders them
// from a map). ok reports such a shape. Otherwise the
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
	in.DNSConfig = &DNSConfig{Nameservers: out.Nameservers, Searches: out.Searches, Options: podOptions(out.Options, nil)}
	return in, false
}

// recoverAs recovers out as an extension of policy p's base and checks
// the candidate reproduces out.
func (e *Engine) recoverAs(in Input, p Policy, out Output, host Host) (Input, bool) {
	in.Policy = p
	kubelet := in
	kubelet.PolicyAnnotation, kubelet.NamespacePolicy = "", ""
	base := e.kubelet.resolver(kubelet, host, nil)
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
		got := e.kubelet.resolver(kubelet, host, nil)
		if slices.Equal(got.Nameservers, out.Nameservers) && slices.Equal(got.Searches, out.Searches) && SameOptions(got.Options, out.Options) {
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
// mergeOptions, whatever out's order (kubelet's is random): every base key
// stays, with its value or a pod override, and the other options are the
// pod's.
func optionExtension(out, base []string) ([]Option, bool) {
	if SameOptions(out, base) {
		return nil, true // as is: kubelet re-renders only with a dnsConfig
	}
	merged := mergeOptions(base, nil, nil)
	rest := slices.Clone(out)
	take := func(i int) string {
		o := rest[i]
		rest = slices.Delete(rest, i, i+1)
		return o
	}
	keys := make(map[string]bool, len(merged))
	var pod []Option
	var left []string // base keys not yet accounted for
	for _, b := range merged {
		k := resolvconf.OptionName(b)
		keys[k] = true
		// A bare key can only be that key with an empty value: an
		// override, unless the base renders the same.
		if i := slices.Index(rest, k); i >= 0 && b != k {
			pod = append(pod, Option{Name: take(i)})
			continue
		}
		left = append(left, b)
	}
	var changed []string
	for _, b := range left {
		if i := slices.Index(rest, b); i >= 0 {
			take(i) // the base option, as rendered
			continue
		}
		changed = append(changed, resolvconf.OptionName(b))
	}
	for _, k := range changed {
		i := slices.IndexFunc(rest, func(o string) bool { return resolvconf.OptionName(o) == k && resolvconf.NormalizeOption(o) == o })
		if i < 0 {
			return nil, false // kubelet never drops a base option
		}
		pod = append(pod, parseOption(take(i)))
	}
	return append(pod, podOptions(rest, keys)...), true
}

// podOptions turns rendered options back into pod options that mergeOptions
// keeps apart (keys is taken as the keys already used, and updated). A text
// without ':' has one key, itself, and is placed first; "a:b:c" becomes the
// first free key of {a, "b:c"}, {"a:b", c} and {"a:b:c"}.
func podOptions(opts []string, keys map[string]bool) []Option {
	if keys == nil {
		keys = map[string]bool{}
	}
	pod := make([]Option, len(opts))
	for _, bare := range []bool{true, false} {
		for i, o := range opts {
			if strings.IndexByte(o, ':') < 0 != bare {
				continue
			}
			p := Option{Name: o}
			for j := 0; j < len(o)-1; j++ {
				if o[j] == ':' && !keys[o[:j]] {
					v := o[j+1:]
					p = Option{Name: o[:j], Value: &v}
					break
				}
			}
			keys[p.Name] = true
			pod[i] = p
		}
	}
	return pod
}

// parseOption splits a resolver option "name:value" at the first ':'.
func parseOption(o string) Option {
	name, value, ok := strings.Cut(o, ":")
	if !ok {
		return Option{Name: name}
	}
	return Option{Name: name, Value: &value}
}

// SameOptions reports whether a and b hold the same options, in any order:
// kubelet renders a pod's options from a map, so their order carries nothing.
func SameOptions(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
