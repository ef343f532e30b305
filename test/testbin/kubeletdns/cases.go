package main

import (
	"fmt"
	"strings"
)

// Inputs shared by the hand-written cases. Addresses are documentation or
// private ranges and names are example.* ones; no loopback nameserver is
// ever written into a resolv.conf.
const (
	clusterDNS4 = "10.96.0.10"
	clusterDNS6 = "fd00:10:96::a"
	nodeIP4     = "10.0.0.1"
	nodeIP6     = "2001:db8:1::1"

	// hostResolv is an ordinary node resolv.conf.
	hostResolv = "nameserver 192.0.2.1\nnameserver 192.0.2.2\nsearch corp.example example.com\noptions ndots:2 timeout:1\n"
)

func list(s ...string) []string { return s }

func ptr(s string) *string { return &s }

// opt is an option without a value; optv one with a value ("" included).
func opt(name string) optionJSON { return optionJSON{Name: name} }

func optv(name, value string) optionJSON { return optionJSON{Name: name, Value: ptr(value)} }

// baseNode is a single-stack IPv4 node with cluster DNS, the cluster.local
// domain and hostResolv.
func baseNode() nodeJSON {
	return nodeJSON{
		ClusterDNS:    list(clusterDNS4),
		ClusterDomain: "cluster.local",
		NodeIPs:       list(nodeIP4),
		ResolvConf:    hostResolv,
	}
}

// disabledNode is baseNode with kubelet's resolvConf set to "".
func disabledNode(nodeIPs ...string) nodeJSON {
	n := baseNode()
	n.ResolvConf = ""
	n.ResolvConfDisabled = true
	n.NodeIPs = nodeIPs
	return n
}

func withResolv(n nodeJSON, resolv string) nodeJSON {
	n.ResolvConf = resolv
	return n
}

func pod(policy string, hostNetwork bool) podJSON {
	return podJSON{Name: "p", Namespace: "ns1", DNSPolicy: policy, HostNetwork: hostNetwork}
}

func withDNS(p podJSON, d dnsConfigJSON) podJSON {
	p.DNSConfig = &d
	return p
}

// longName returns a name of exactly n characters made of labels of at most
// 63 characters, starting with tag and ending in ".example".
func longName(tag string, n int) string {
	const suffix = ".example"
	rem := n - len(suffix)
	if rem < 1 {
		panic(fmt.Sprintf("longName(%q, %d): too short", tag, n))
	}
	var labels []string
	first := true
	for rem > 0 {
		size := rem
		if size > 63 {
			size = 62 // 62 characters and a dot, leaving at least one
		}
		label := strings.Repeat(tag[len(tag)-1:], size)
		if first {
			label = (tag + label)[:size]
			first = false
		}
		labels = append(labels, label)
		rem -= size
		if rem > 0 {
			rem-- // the dot
		}
	}
	name := strings.Join(labels, ".") + suffix
	if len(name) != n {
		panic(fmt.Sprintf("longName(%q, %d) has %d characters", tag, n, len(name)))
	}
	return name
}

// searchLine returns distinct names, tagged by tag, whose space-joined
// length is exactly total (more than 250).
func searchLine(tag string, total int) []string {
	var out []string
	rem := total
	for i := 0; rem > 251; i++ {
		out = append(out, longName(fmt.Sprintf("%s%d", tag, i), 199))
		rem -= 200
	}
	out = append(out, longName(tag+"z", rem))
	if got := len(strings.Join(out, " ")); got != total {
		panic(fmt.Sprintf("searchLine(%q, %d) is %d long", tag, total, got))
	}
	return out
}

// numbered returns n distinct short names.
func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d.corp.example", prefix, i)
	}
	return out
}

func resolv(servers []string, searches []string, options string) string {
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if searches != nil {
		fmt.Fprintf(&b, "search %s\n", strings.Join(searches, " "))
	}
	if options != "" {
		fmt.Fprintf(&b, "options %s\n", options)
	}
	return b.String()
}

func mk(name string, node nodeJSON, p podJSON) caseJSON {
	return caseJSON{Name: name, Node: node, Pod: p}
}

// handWritten covers each policy, hostNetwork, node settings, the host file
// parser, the pod dnsConfig merge and every limit at and past its boundary.
func handWritten() []caseJSON {
	policies := []string{"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None", "Bogus", ""}
	var cs []caseJSON
	for _, pol := range policies {
		for _, hn := range []bool{false, true} {
			nw := "podnet"
			if hn {
				nw = "hostnet"
			}
			name := strings.ToLower(pol)
			if pol == "" {
				name = "empty"
			}
			// Without dnsConfig (None then renders empty), with an empty one,
			// and with one of each field.
			cs = append(cs,
				mk(fmt.Sprintf("policy-%s-%s-no-dnsconfig", name, nw), baseNode(), pod(pol, hn)),
				mk(fmt.Sprintf("policy-%s-%s-empty-dnsconfig", name, nw), baseNode(), withDNS(pod(pol, hn), dnsConfigJSON{})),
				mk(fmt.Sprintf("policy-%s-%s-dnsconfig", name, nw), baseNode(), withDNS(pod(pol, hn), dnsConfigJSON{
					Nameservers: list("203.0.113.53"),
					Searches:    list("team.corp.example"),
					Options:     []optionJSON{optv("ndots", "3"), opt("edns0")},
				})),
			)
			// No cluster DNS: cluster-type pods fall back to the host file.
			noDNS := baseNode()
			noDNS.ClusterDNS = nil
			cs = append(cs, mk(fmt.Sprintf("no-clusterdns-%s-%s", name, nw), noDNS, pod(pol, hn)))
			// No cluster DNS and no host file.
			noDNSDisabled := disabledNode(nodeIP4)
			noDNSDisabled.ClusterDNS = nil
			cs = append(cs, mk(fmt.Sprintf("no-clusterdns-resolvconf-disabled-%s-%s", name, nw), noDNSDisabled, pod(pol, hn)))
			// resolvConf disabled, cluster DNS present.
			cs = append(cs, mk(fmt.Sprintf("resolvconf-disabled-%s-%s", name, nw), disabledNode(nodeIP4), pod(pol, hn)))
		}
	}

	noDomain := baseNode()
	noDomain.ClusterDomain = ""
	noDNS := baseNode()
	noDNS.ClusterDNS = nil
	cs = append(cs,
		mk("no-clusterdns-clusterfirst-dnsconfig", noDNS, withDNS(pod("ClusterFirst", false), dnsConfigJSON{
			Nameservers: list("192.0.2.1", "203.0.113.53"),
			Searches:    list("corp.example", "team.corp.example"),
			Options:     []optionJSON{optv("timeout", "3")},
		})),
		mk("no-clusterdomain-clusterfirst", noDomain, pod("ClusterFirst", false)),
		mk("no-clusterdomain-clusterfirst-no-host-search", withResolv(noDomain, "nameserver 192.0.2.1\noptions rotate\n"), pod("ClusterFirst", false)),
		mk("no-clusterdomain-clusterfirst-dnsconfig", noDomain, withDNS(pod("ClusterFirst", false), dnsConfigJSON{Searches: list("example.com", "team.corp.example")})),
		mk("no-clusterdomain-resolvconf-disabled-clusterfirst", func() nodeJSON { n := disabledNode(nodeIP4); n.ClusterDomain = ""; return n }(), pod("ClusterFirst", false)),
		mk("no-clusterdomain-no-clusterdns-default", func() nodeJSON { n := noDomain; n.ClusterDNS = nil; return n }(), pod("Default", false)),
		mk("empty-namespace-clusterfirst", baseNode(), podJSON{Name: "p", Namespace: "", DNSPolicy: "ClusterFirst"}),
		mk("clusterdomain-corp-example-duplicates-host-search", func() nodeJSON { n := baseNode(); n.ClusterDomain = "corp.example"; return n }(), pod("ClusterFirst", false)),
	)

	// Address families.
	for _, f := range []struct {
		name       string
		clusterDNS []string
		nodeIPs    []string
	}{
		{"ipv6", list(clusterDNS6), list(nodeIP6)},
		{"dualstack-v4-first", list(clusterDNS4, clusterDNS6), list(nodeIP4, nodeIP6)},
		{"dualstack-v6-first", list(clusterDNS6, clusterDNS4), list(nodeIP6, nodeIP4)},
		{"ipv6-noncanonical-clusterdns", list("FD00:10:96:0::000A"), list(nodeIP6)},
		{"four-clusterdns", list("10.96.0.10", "10.96.0.11", "10.96.0.12", "10.96.0.13"), list(nodeIP4)},
		{"three-clusterdns-and-pod-nameserver", list("10.96.0.10", "10.96.0.11", "fd00:10:96::a"), list(nodeIP4)},
	} {
		n := baseNode()
		n.ClusterDNS = f.clusterDNS
		n.NodeIPs = f.nodeIPs
		cs = append(cs,
			mk("family-"+f.name+"-clusterfirst", n, pod("ClusterFirst", false)),
			mk("family-"+f.name+"-clusterfirst-dnsconfig", n, withDNS(pod("ClusterFirst", false), dnsConfigJSON{Nameservers: list("2001:db8::53")})),
			mk("family-"+f.name+"-default", n, pod("Default", false)),
		)
		d := disabledNode(f.nodeIPs...)
		d.ClusterDNS = f.clusterDNS
		cs = append(cs, mk("family-"+f.name+"-resolvconf-disabled-default", d, pod("Default", false)))
	}

	// resolvConf disabled: one local server per node IP.
	for _, d := range []struct {
		name    string
		nodeIPs []string
	}{
		{"no-nodeips", nil},
		{"two-v4-nodeips", list("10.0.0.1", "10.0.0.2")},
		{"two-v6-nodeips", list("2001:db8:1::1", "2001:db8:1::2")},
		{"v4-v6-v4-nodeips", list("10.0.0.1", "2001:db8:1::1", "10.0.0.2")},
	} {
		cs = append(cs,
			mk("resolvconf-disabled-"+d.name+"-default", disabledNode(d.nodeIPs...), pod("Default", false)),
			mk("resolvconf-disabled-"+d.name+"-default-empty-dnsconfig", disabledNode(d.nodeIPs...), withDNS(pod("Default", false), dnsConfigJSON{})),
		)
	}
	cs = append(cs,
		mk("resolvconf-disabled-default-dnsconfig", disabledNode(nodeIP4), withDNS(pod("Default", true), dnsConfigJSON{
			Nameservers: list("192.0.2.1"),
			Searches:    list("corp.example", "."),
			Options:     []optionJSON{optv("ndots", "1")},
		})),
	)

	// The host file parser.
	for _, h := range []struct{ name, resolv string }{
		{"empty-file", ""},
		{"comments-only", "# nothing here\n#nameserver 192.0.2.9\n"},
		{"search-duplicates-cluster", "nameserver 192.0.2.1\nsearch ns1.svc.cluster.local svc.cluster.local cluster.local corp.example\n"},
		{"search-duplicates-cluster-reordered", "nameserver 192.0.2.1\nsearch corp.example cluster.local ns1.svc.cluster.local\n"},
		{"search-duplicates-within-host", "nameserver 192.0.2.1\nsearch corp.example example.com corp.example\n"},
		{"search-trailing-dots", "nameserver 192.0.2.1\nsearch cluster.local. corp.example. example.com.. svc.cluster.local\n"},
		{"search-lone-dot", "nameserver 192.0.2.1\nsearch . corp.example .\n"},
		{"search-only-dot", "nameserver 192.0.2.1\nsearch .\n"},
		{"search-mixed-case", "nameserver 192.0.2.1\nsearch Corp.Example corp.example CLUSTER.LOCAL\n"},
		{"search-last-line-wins", "nameserver 192.0.2.1\nsearch first.example\nsearch second.example third.example\n"},
		{"search-empty-line-clears", "nameserver 192.0.2.1\nsearch first.example\nsearch\n"},
		{"search-inline-comment", "nameserver 192.0.2.1\nsearch corp.example # office\n"},
		{"domain-keyword-ignored", "nameserver 192.0.2.1\ndomain corp.example\n"},
		{"options-multiple-lines", "nameserver 192.0.2.1\noptions ndots:2 timeout:1\noptions attempts:3 ndots:3\noptions rotate\n"},
		{"options-repeated-in-line", "nameserver 192.0.2.1\noptions ndots:2 ndots:4 edns0 edns0\n"},
		{"options-bare-ndots", "nameserver 192.0.2.1\noptions ndots timeout:2\n"},
		{"duplicate-nameservers", "nameserver 192.0.2.1\nnameserver 192.0.2.1\nnameserver 2001:db8::53\n"},
		{"four-nameservers", "nameserver 192.0.2.1\nnameserver 192.0.2.2\nnameserver 198.51.100.53\nnameserver 2001:db8::53\n"},
		{"nameserver-inline-comment", "nameserver 192.0.2.1 # primary\nnameserver\t192.0.2.2\n"},
		{"nameserver-not-an-ip", "nameserver dns.corp.example\n"},
		{"nameserver-uppercase-ipv6", "nameserver 2001:DB8::53\nnameserver 2001:db8::53\n"},
		{"semicolon-comment-and-indent", "; a comment\n  nameserver 192.0.2.1  \n\tsearch corp.example\n#search ignored.example\n"},
		{"no-trailing-newline", "nameserver 192.0.2.1\nsearch corp.example"},
		{"crlf-line-endings", "nameserver 192.0.2.1\r\nsearch corp.example\r\noptions ndots:2\r\n"},
		{"unknown-keywords", "nameserver 192.0.2.1\nsortlist 192.0.2.0/255.255.255.0\nlookup file bind\nNameserver 192.0.2.9\n"},
	} {
		n := withResolv(baseNode(), h.resolv)
		cs = append(cs,
			mk("host-"+h.name+"-default", n, pod("Default", false)),
			mk("host-"+h.name+"-clusterfirst", n, pod("ClusterFirst", false)),
			mk("host-"+h.name+"-default-dnsconfig", n, withDNS(pod("Default", false), dnsConfigJSON{
				Nameservers: list("192.0.2.1"),
				Searches:    list("corp.example"),
				Options:     []optionJSON{optv("timeout", "5")},
			})),
		)
	}

	// A broken host file fails every pod, None included.
	for _, b := range []struct{ name, resolv string }{
		{"bare-nameserver", "nameserver\n"},
		{"bare-nameserver-after-valid", "nameserver 192.0.2.1\nnameserver\nsearch corp.example\n"},
		{"two-bare-nameservers", "nameserver   \nsearch corp.example\n\tnameserver\n"},
	} {
		n := withResolv(baseNode(), b.resolv)
		for _, pol := range []string{"ClusterFirst", "Default", "None"} {
			p := withDNS(pod(pol, false), dnsConfigJSON{Nameservers: list("203.0.113.53")})
			cs = append(cs, mk("broken-"+b.name+"-"+strings.ToLower(pol), n, p))
		}
	}

	// The pod's dnsConfig merge.
	hostWithDup := withResolv(baseNode(), "nameserver 192.0.2.1\nsearch corp.example example.com\noptions ndots:2 timeout:1 rotate\n")
	for _, pol := range []string{"ClusterFirst", "Default", "None"} {
		lp := strings.ToLower(pol)
		cs = append(cs,
			mk("merge-nameservers-duplicate-"+lp, hostWithDup, withDNS(pod(pol, false), dnsConfigJSON{
				Nameservers: list("10.96.0.10", "192.0.2.1", "203.0.113.53", "203.0.113.53"),
			})),
			mk("merge-nameservers-ipv6-spelling-"+lp, hostWithDup, withDNS(pod(pol, false), dnsConfigJSON{
				Nameservers: list("2001:db8::53", "2001:DB8:0::53"),
			})),
			mk("merge-searches-duplicate-"+lp, hostWithDup, withDNS(pod(pol, false), dnsConfigJSON{
				Searches: list("ns1.svc.cluster.local", "cluster.local", "corp.example", "team.corp.example", "team.corp.example"),
			})),
			mk("merge-searches-trailing-dot-"+lp, hostWithDup, withDNS(pod(pol, false), dnsConfigJSON{
				Searches: list("cluster.local.", "corp.example.", "team.corp.example.", "."),
			})),
			mk("merge-searches-case-"+lp, hostWithDup, withDNS(pod(pol, false), dnsConfigJSON{
				Searches: list("Corp.Example", "CLUSTER.LOCAL"),
			})),
			mk("merge-options-override-"+lp, hostWithDup, withDNS(pod(pol, false), dnsConfigJSON{
				Options: []optionJSON{optv("ndots", "1"), optv("timeout", "3"), opt("attempts"), optv("edns0", "")},
			})),
			mk("merge-options-empty-value-"+lp, hostWithDup, withDNS(pod(pol, false), dnsConfigJSON{
				Options: []optionJSON{optv("ndots", ""), optv("rotate", "")},
			})),
			mk("merge-options-absent-value-"+lp, hostWithDup, withDNS(pod(pol, false), dnsConfigJSON{
				Options: []optionJSON{opt("ndots"), opt("timeout"), opt("use-vc")},
			})),
			mk("merge-options-value-x-"+lp, hostWithDup, withDNS(pod(pol, false), dnsConfigJSON{
				Options: []optionJSON{optv("ndots", "x"), optv("rotate", "x"), optv("edns0", "x")},
			})),
			mk("merge-options-repeated-later-wins-"+lp, hostWithDup, withDNS(pod(pol, false), dnsConfigJSON{
				Options: []optionJSON{optv("ndots", "2"), opt("edns0"), optv("ndots", "3"), optv("edns0", "1"), opt("ndots")},
			})),
			mk("merge-options-name-with-colon-"+lp, hostWithDup, withDNS(pod(pol, false), dnsConfigJSON{
				Options: []optionJSON{opt("ndots:3"), optv("timeout:1", "2")},
			})),
			mk("merge-all-fields-"+lp, hostWithDup, withDNS(pod(pol, true), dnsConfigJSON{
				Nameservers: list("198.51.100.53", "2001:db8::53"),
				Searches:    list("team.corp.example", "example.com"),
				Options:     []optionJSON{optv("ndots", "2"), opt("single-request-reopen"), optv("attempts", "")},
			})),
		)
	}

	// Nameserver limit: at most 3, cut after the merge.
	cs = append(cs,
		mk("limit-nameservers-cluster-plus-three-pod", baseNode(), withDNS(pod("ClusterFirst", false), dnsConfigJSON{
			Nameservers: list("192.0.2.53", "198.51.100.53", "203.0.113.53"),
		})),
		mk("limit-nameservers-three-pod-none", baseNode(), withDNS(pod("None", false), dnsConfigJSON{
			Nameservers: list("192.0.2.53", "198.51.100.53", "203.0.113.53"),
		})),
		mk("limit-nameservers-four-pod-none", baseNode(), withDNS(pod("None", false), dnsConfigJSON{
			Nameservers: list("192.0.2.53", "198.51.100.53", "203.0.113.53", "2001:db8::53"),
		})),
		mk("limit-nameservers-host-two-plus-two-pod", baseNode(), withDNS(pod("Default", false), dnsConfigJSON{
			Nameservers: list("192.0.2.2", "198.51.100.53", "203.0.113.53"),
		})),
		mk("limit-nameservers-duplicates-keep-under-limit", baseNode(), withDNS(pod("Default", false), dnsConfigJSON{
			Nameservers: list("192.0.2.1", "192.0.2.2", "203.0.113.53"),
		})),
		mk("limit-nameservers-resolvconf-disabled-four-nodeips", disabledNode("10.0.0.1", "10.0.0.2", "2001:db8:1::1", "10.0.0.3"), pod("Default", false)),
	)

	// Search count limit: 32 entries.
	host29 := withResolv(baseNode(), resolv(list("192.0.2.1"), numbered("h", 29), ""))
	host30 := withResolv(baseNode(), resolv(list("192.0.2.1"), numbered("h", 30), ""))
	host40 := withResolv(baseNode(), resolv(list("192.0.2.1"), numbered("h", 40), ""))
	cs = append(cs,
		mk("limit-search-count-exactly-32-clusterfirst", host29, pod("ClusterFirst", false)),
		mk("limit-search-count-33-clusterfirst", host30, pod("ClusterFirst", false)),
		mk("limit-search-count-40-host-default", host40, pod("Default", false)),
		mk("limit-search-count-32-host-default", withResolv(baseNode(), resolv(list("192.0.2.1"), numbered("h", 32), "")), pod("Default", false)),
		mk("limit-search-count-pod-searches-cut-first", host29, withDNS(pod("ClusterFirst", false), dnsConfigJSON{
			Searches: list("team.corp.example", "example.com"),
		})),
		mk("limit-search-count-duplicates-do-not-count", host29, withDNS(pod("ClusterFirst", false), dnsConfigJSON{
			Searches: list("h00.corp.example", "cluster.local", "h28.corp.example"),
		})),
		mk("limit-search-count-32-pod-none", baseNode(), withDNS(pod("None", false), dnsConfigJSON{
			Nameservers: list("192.0.2.53"), Searches: numbered("p", 32),
		})),
		mk("limit-search-count-33-pod-none", baseNode(), withDNS(pod("None", false), dnsConfigJSON{
			Nameservers: list("192.0.2.53"), Searches: numbered("p", 33),
		})),
		mk("limit-search-count-resolvconf-disabled-dot-plus-32-pod", disabledNode(nodeIP4), withDNS(pod("Default", false), dnsConfigJSON{
			Searches: numbered("p", 32),
		})),
	)

	// Search entry limit: entries over 253 characters are dropped.
	for _, l := range []int{253, 254, 300} {
		name := longName("e", l)
		cs = append(cs,
			mk(fmt.Sprintf("limit-search-entry-%d-host-clusterfirst", l), withResolv(baseNode(), resolv(list("192.0.2.1"), list("corp.example", name, "example.com"), "")), pod("ClusterFirst", false)),
			mk(fmt.Sprintf("limit-search-entry-%d-pod-default", l), baseNode(), withDNS(pod("Default", false), dnsConfigJSON{Searches: list(name, "team.corp.example")})),
		)
	}
	cs = append(cs,
		mk("limit-search-entry-254-with-trailing-dot-host", withResolv(baseNode(), resolv(list("192.0.2.1"), list(longName("t", 253)+"."), "")), pod("Default", false)),
		mk("limit-search-entry-254-with-trailing-dot-pod", baseNode(), withDNS(pod("Default", false), dnsConfigJSON{Searches: list(longName("t", 253) + ".")})),
	)
	// The count cut happens before the long entries are dropped: 31 remain.
	longIn32 := append(numbered("h", 20), longName("l", 260))
	longIn32 = append(longIn32, numbered("k", 15)...)
	cs = append(cs, mk("limit-search-count-then-entry-leaves-31", withResolv(baseNode(), resolv(list("192.0.2.1"), longIn32, "")), pod("Default", false)))

	// Search line limit: 2048 characters, cut whole entries from the end.
	for _, total := range []int{2047, 2048, 2049, 2100, 3000} {
		line := searchLine(fmt.Sprintf("s%d", total), total)
		cs = append(cs,
			mk(fmt.Sprintf("limit-search-line-%d-host-default", total), withResolv(baseNode(), resolv(list("192.0.2.1"), line, "")), pod("Default", false)),
			mk(fmt.Sprintf("limit-search-line-%d-pod-none", total), baseNode(), withDNS(pod("None", false), dnsConfigJSON{Nameservers: list("192.0.2.53"), Searches: line})),
		)
	}
	cs = append(cs,
		mk("limit-search-line-host-fits-pod-cut", withResolv(baseNode(), resolv(list("192.0.2.1"), searchLine("f", 1990), "")), withDNS(pod("ClusterFirst", false), dnsConfigJSON{
			Searches: list("team.corp.example", "example.com"),
		})),
		mk("limit-all-three-search-limits", withResolv(baseNode(), resolv(list("192.0.2.1"), append(append(numbered("h", 10), longName("x", 254)), searchLine("a", 1900)...), "")), withDNS(pod("ClusterFirst", false), dnsConfigJSON{
			Nameservers: list("192.0.2.53", "198.51.100.53", "203.0.113.53"),
			Searches:    numbered("p", 25),
		})),
	)
	return append(cs, nameCases()...)
}

// named is a ClusterFirst pod off the host network, changed by mod.
func named(mod func(*podJSON)) podJSON {
	p := pod("ClusterFirst", false)
	mod(&p)
	return p
}

// nameCases cover the sandbox hostname and FQDN: the pod name,
// spec.hostname and spec.subdomain, truncation to 63 characters,
// setHostnameAsFQDN at and past the kernel's 64, the errors, and
// spec.hostnameOverride, which kubelet ignores before 1.35 (feature gate
// HostnameOverride: alpha and off in 1.34, beta and on in 1.35, GA in 1.37).
func nameCases() []caseJSON {
	noDomain := baseNode()
	noDomain.ClusterDomain = ""
	// "s.ns1.svc.cluster.local" is 23 characters: a 40-character hostname
	// makes a 64-character FQDN.
	const domainLen = len("s.ns1.svc.cluster.local")
	return []caseJSON{
		mk("names-hostname-and-subdomain", baseNode(), named(func(p *podJSON) { p.Hostname, p.Subdomain = "web-0", "web" })),
		mk("names-subdomain-only", baseNode(), named(func(p *podJSON) { p.Subdomain = "web" })),
		mk("names-subdomain-no-clusterdomain", noDomain, named(func(p *podJSON) { p.Subdomain = "web" })),
		mk("names-subdomain-empty-namespace", baseNode(), named(func(p *podJSON) { p.Namespace, p.Subdomain = "", "web" })),
		mk("names-dotted-podname", baseNode(), named(func(p *podJSON) { p.Name = "web.v1" })),
		mk("names-podname-63", baseNode(), named(func(p *podJSON) { p.Name = strings.Repeat("a", 63) })),
		mk("names-podname-64-truncated", baseNode(), named(func(p *podJSON) { p.Name = strings.Repeat("a", 64) })),
		mk("names-podname-truncated-then-trimmed", baseNode(), named(func(p *podJSON) { p.Name = strings.Repeat("a", 60) + ".-.-x" })),
		mk("names-podname-nothing-left", baseNode(), named(func(p *podJSON) { p.Name = strings.Repeat("-", 70) })),
		mk("names-hostname-64-invalid", baseNode(), named(func(p *podJSON) { p.Hostname = strings.Repeat("h", 64) })),
		mk("names-hostname-uppercase-invalid", baseNode(), named(func(p *podJSON) { p.Hostname = "Web" })),
		mk("names-subdomain-dotted-invalid", baseNode(), named(func(p *podJSON) { p.Subdomain = "a.b" })),
		mk("names-fqdn-64", baseNode(), named(func(p *podJSON) {
			p.Hostname, p.Subdomain, p.SetHostnameAsFQDN = strings.Repeat("h", 63-domainLen), "s", true
		})),
		mk("names-fqdn-65-too-long", baseNode(), named(func(p *podJSON) {
			p.Hostname, p.Subdomain, p.SetHostnameAsFQDN = strings.Repeat("h", 64-domainLen), "s", true
		})),
		mk("names-fqdn-no-subdomain", baseNode(), named(func(p *podJSON) { p.Hostname, p.SetHostnameAsFQDN = "web-0", true })),
		mk("names-fqdn-truncated-hostname-too-long", baseNode(), named(func(p *podJSON) {
			p.Name, p.Subdomain, p.SetHostnameAsFQDN = strings.Repeat("a", 70), "s", true
		})),
		mk("names-fqdn-hostnetwork", baseNode(), func() podJSON {
			p := pod("ClusterFirstWithHostNet", true)
			p.Hostname, p.Subdomain, p.SetHostnameAsFQDN = "web-0", "web", true
			return p
		}()),

		// spec.hostnameOverride: the hostname from 1.35, ignored before.
		mk("names-override", baseNode(), named(func(p *podJSON) { p.HostnameOverride = ptr("over.ride.example") })),
		mk("names-override-with-hostname-and-subdomain", baseNode(), named(func(p *podJSON) {
			p.Hostname, p.Subdomain, p.HostnameOverride = "web-0", "web", ptr("custom-host")
		})),
		mk("names-override-64-truncated", baseNode(), named(func(p *podJSON) { p.HostnameOverride = ptr(strings.Repeat("o", 64)) })),
		mk("names-override-truncated-then-trimmed", baseNode(), named(func(p *podJSON) {
			p.HostnameOverride = ptr(strings.Repeat("o", 61) + ".p." + strings.Repeat("q", 10))
		})),
		mk("names-override-invalid", baseNode(), named(func(p *podJSON) { p.HostnameOverride = ptr("Bad_Name") })),
		mk("names-override-empty", baseNode(), named(func(p *podJSON) { p.HostnameOverride = ptr("") })),
		mk("names-override-with-fqdn", baseNode(), named(func(p *podJSON) {
			p.Hostname, p.Subdomain, p.SetHostnameAsFQDN, p.HostnameOverride = "web-0", "web", true, ptr("custom-host")
		})),
		mk("names-override-with-fqdn-too-long", baseNode(), named(func(p *podJSON) {
			p.Hostname, p.Subdomain, p.SetHostnameAsFQDN, p.HostnameOverride = strings.Repeat("h", 64-domainLen), "s", true, ptr("custom-host")
		})),
		mk("names-override-invalid-hostname", baseNode(), named(func(p *podJSON) { p.Hostname, p.HostnameOverride = "Web", ptr("custom-host") })),
		mk("names-override-hostnetwork", baseNode(), func() podJSON {
			p := pod("ClusterFirstWithHostNet", true)
			p.HostnameOverride = ptr("custom-host")
			return p
		}()),
	}
}
