package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// defaultSeed seeds the pseudo-random cases of the committed fixture.
const defaultSeed = 20250934

// Small pools, so that entries repeat across the cluster, host and pod
// lists, plus long names, so that the search limits are hit now and then.
var (
	randClusterDNS = [][]string{
		nil,
		{"10.96.0.10"},
		{"fd00:10:96::a"},
		{"10.96.0.10", "fd00:10:96::a"},
		{"fd00:10:96::a", "10.96.0.10"},
		{"10.96.0.10", "10.96.0.11", "10.96.0.12", "10.96.0.13"},
		{"10.96.0.11", "10.96.0.10"},
	}
	randClusterDomains = []string{"cluster.local", "cluster.local", "cluster.local", "", "corp.example", "k8s.example"}
	randNodeIPs        = [][]string{
		nil,
		{"10.0.0.1"},
		{"2001:db8:1::1"},
		{"10.0.0.1", "2001:db8:1::1"},
		{"2001:db8:1::1", "10.0.0.1"},
		{"10.0.0.1", "10.0.0.2"},
	}
	// randHostNameservers never overlaps randClusterDNS: a Default output
	// must not be mistakable for a ClusterFirst one. Pods may name either.
	randHostNameservers = []string{
		"192.0.2.1", "192.0.2.2", "198.51.100.53", "203.0.113.53",
		"2001:db8::53", "2001:db8::1",
	}
	randPodNameservers = append(slices.Clone(randHostNameservers), "10.96.0.10", "10.96.0.11", "fd00:10:96::a")
	randSearches       = []string{
		"cluster.local", "svc.cluster.local", "ns1.svc.cluster.local", "default.svc.cluster.local",
		"corp.example", "dev.corp.example", "example.com", "example.net", "k8s.example", "svc.k8s.example",
		"cluster.local.", "corp.example.", "Corp.Example", "_tcp.example.org",
	}
	randLongSearches = longNames(24, 60, 100, 150, 200, 252, 253, 254, 300)
	randHostOptions  = []string{
		"ndots:1", "ndots:2", "ndots:3", "timeout:1", "timeout:2", "attempts:3",
		"rotate", "edns0", "single-request-reopen", "trust-ad", "ndots",
	}
	randOptionNames  = []string{"ndots", "ndots", "timeout", "attempts", "edns0", "rotate", "use-vc", "single-request"}
	randOptionValues = []string{"1", "2", "3", "5", "x"}
	randNamespaces   = []string{"ns1", "default", "kube-system", "team-a"}
	randPolicies     = []string{
		"ClusterFirst", "ClusterFirst", "ClusterFirst", "ClusterFirst", "ClusterFirst", "ClusterFirst", "ClusterFirst",
		"ClusterFirstWithHostNet", "ClusterFirstWithHostNet", "ClusterFirstWithHostNet",
		"Default", "Default", "Default", "Default",
		"None", "None", "None", "None",
		"Bogus", "",
	}
)

// randomCases returns n cases drawn from a PCG source seeded with seed.
func randomCases(seed uint64, n int) []caseJSON {
	r := rand.New(rand.NewPCG(seed, seed^0x6b75626c6574646e)) // "kubletdn"
	cs := make([]caseJSON, 0, n)
	for i := range n {
		c := caseJSON{
			Node: nodeJSON{
				ClusterDNS:    pick(r, randClusterDNS),
				ClusterDomain: pick(r, randClusterDomains),
				NodeIPs:       pick(r, randNodeIPs),
			},
			Pod: podJSON{
				Name:        fmt.Sprintf("p-%03d", i),
				Namespace:   pick(r, randNamespaces),
				DNSPolicy:   pick(r, randPolicies),
				HostNetwork: r.IntN(2) == 0,
			},
		}
		if r.IntN(7) == 0 {
			c.Node.ResolvConfDisabled = true
		} else {
			c.Node.ResolvConf = randResolvConf(r)
		}
		switch k := r.IntN(20); {
		case k < 7: // no dnsConfig
		case k < 9:
			c.Pod.DNSConfig = &dnsConfigJSON{}
		default:
			c.Pod.DNSConfig = randDNSConfig(r)
		}

		policy := c.Pod.DNSPolicy
		if policy == "" {
			policy = "empty"
		}
		nw := "podnet"
		if c.Pod.HostNetwork {
			nw = "hostnet"
		}
		c.Name = fmt.Sprintf("random-%03d-%s-%s", i, strings.ToLower(policy), nw)
		cs = append(cs, c)
	}
	return cs
}

// longNames returns n distinct names, their lengths cycling through lengths.
func longNames(n int, lengths ...int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = longName(fmt.Sprintf("l%02dx", i), lengths[i%len(lengths)])
	}
	return out
}

func pick[T any](r *rand.Rand, from []T) T { return from[r.IntN(len(from))] }

// randSearchList draws a search list: usually a few entries from the small
// pool, now and then a long list of mostly distinct and long names, enough
// to pass 32 entries or 2048 characters.
func randSearchList(r *rand.Rand) []string {
	if r.IntN(7) == 0 {
		n := 20 + r.IntN(30)
		out := make([]string, 0, n)
		for range n {
			switch k := r.IntN(8); {
			case k < 3:
				out = append(out, fmt.Sprintf("n%d.corp.example", r.IntN(80)))
			case k < 4:
				out = append(out, pick(r, randSearches))
			default:
				out = append(out, pick(r, randLongSearches))
			}
		}
		return out
	}
	n := r.IntN(5)
	out := make([]string, 0, n)
	for range n {
		switch k := r.IntN(10); {
		case k < 7:
			out = append(out, pick(r, randSearches))
		case k < 8:
			out = append(out, fmt.Sprintf("n%d.corp.example", r.IntN(80)))
		default:
			out = append(out, pick(r, randLongSearches))
		}
	}
	return out
}

// randResolvConf writes a node resolv.conf: nameservers, search and options
// lines in a random order, with comments, ignored keywords, trailing dots,
// a lone "." and now and then a bare "nameserver" line (a parse error).
func randResolvConf(r *rand.Rand) string {
	var lines []string
	if r.IntN(4) == 0 {
		lines = append(lines, "# generated by kubeletdns")
	}
	for range r.IntN(6) {
		ns := pick(r, randHostNameservers)
		if r.IntN(10) == 0 {
			ns += " # comment"
		}
		lines = append(lines, "nameserver "+ns)
	}
	for range r.IntN(3) {
		s := randSearchList(r)
		if r.IntN(6) == 0 {
			s = append(s, ".")
		}
		lines = insert(r, lines, strings.TrimSpace("search "+strings.Join(s, " ")))
	}
	for range r.IntN(3) {
		var opts []string
		for range 1 + r.IntN(3) {
			opts = append(opts, pick(r, randHostOptions))
		}
		lines = insert(r, lines, "options "+strings.Join(opts, " "))
	}
	if r.IntN(8) == 0 {
		lines = insert(r, lines, "domain corp.example")
	}
	if r.IntN(25) == 0 {
		lines = insert(r, lines, "nameserver")
	}
	for i := range lines {
		if r.IntN(12) == 0 {
			lines[i] = "\t" + lines[i] + " "
		}
	}
	text := strings.Join(lines, "\n")
	if len(lines) > 0 && r.IntN(6) != 0 {
		text += "\n"
	}
	return text
}

// insert puts line at a random position in lines.
func insert(r *rand.Rand, lines []string, line string) []string {
	i := r.IntN(len(lines) + 1)
	lines = append(lines, "")
	copy(lines[i+1:], lines[i:])
	lines[i] = line
	return lines
}

// randDNSConfig draws a pod dnsConfig; any of its lists may be empty, and
// option values are absent, "" or set.
func randDNSConfig(r *rand.Rand) *dnsConfigJSON {
	d := &dnsConfigJSON{}
	for range r.IntN(5) {
		d.Nameservers = append(d.Nameservers, pick(r, randPodNameservers))
	}
	if r.IntN(4) != 0 {
		d.Searches = randSearchList(r)
		if r.IntN(10) == 0 {
			d.Searches = append(d.Searches, ".")
		}
	}
	for range r.IntN(5) {
		o := optionJSON{Name: pick(r, randOptionNames)}
		switch k := r.IntN(10); {
		case k < 4: // no value
		case k < 6:
			o.Value = ptr("")
		default:
			o.Value = ptr(pick(r, randOptionValues))
		}
		d.Options = append(d.Options, o)
	}
	return d
}
