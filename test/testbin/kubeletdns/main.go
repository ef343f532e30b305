// Command kubeletdns runs kubelet's own pod DNS code over a table of cases
// and writes what kubelet returned as plain JSON.
//
// The code is Configurer.GetPodDNS of
// k8s.io/kubernetes/pkg/kubelet/network/dns. The cases are hand-written ones
// and a fixed-seed set of pseudo-random ones. pkg/policy tests its engine
// and the engine's inverse against that file
// (pkg/policy/testdata/kubelet-outputs.json) without importing any k8s.io
// package.
//
// The generator only builds inputs and records outputs: every server, search
// and option in the file comes from GetPodDNS. The one change it makes is to
// sort the options, which kubelet builds from a Go map and so returns in a
// random order; the servers and searches keep kubelet's order.
//
// Usage, from test/testbin:
//
//	go run ./kubeletdns -out ../../pkg/policy/testdata/kubelet-outputs.json
package main

//go:generate go run . -out ../../../pkg/policy/testdata/kubelet-outputs.json

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/network/dns"
	netutils "k8s.io/utils/net"
)

// kubeletVersion names the code the fixture comes from; keep it equal to
// the k8s.io/kubernetes requirement in test/testbin/go.mod.
const kubeletVersion = "k8s.io/kubernetes v1.34.4"

// fixture is the file's top level.
type fixture struct {
	Kubelet string     `json:"kubelet"`
	Cases   []caseJSON `json:"cases"`
}

// caseJSON is one GetPodDNS call: the node's kubelet settings, the pod, and
// kubelet's answer (Output) or its error (Error, with Output null).
type caseJSON struct {
	Name   string      `json:"name"`
	Node   nodeJSON    `json:"node"`
	Pod    podJSON     `json:"pod"`
	Output *outputJSON `json:"output"`
	Error  string      `json:"error"`
}

// nodeJSON holds the kubelet configuration fields that reach
// dns.NewConfigurer. ResolvConfDisabled means resolvConf: "" in the kubelet
// configuration; otherwise ResolvConf is the content of the file kubelet
// reads.
type nodeJSON struct {
	ClusterDNS         []string `json:"clusterDNS"`
	ClusterDomain      string   `json:"clusterDomain"`
	NodeIPs            []string `json:"nodeIPs"`
	ResolvConf         string   `json:"resolvConf"`
	ResolvConfDisabled bool     `json:"resolvConfDisabled"`
}

// podJSON holds the pod fields GetPodDNS reads. DNSConfig nil is a pod
// without spec.dnsConfig, which kubelet treats differently from an empty one.
type podJSON struct {
	Name        string         `json:"name"`
	Namespace   string         `json:"namespace"`
	DNSPolicy   string         `json:"dnsPolicy"`
	HostNetwork bool           `json:"hostNetwork"`
	DNSConfig   *dnsConfigJSON `json:"dnsConfig"`
}

type dnsConfigJSON struct {
	Nameservers []string     `json:"nameservers"`
	Searches    []string     `json:"searches"`
	Options     []optionJSON `json:"options"`
}

// optionJSON is a v1.PodDNSConfigOption; a nil Value is left out of the
// JSON, which is how the API tells "no value" from "".
type optionJSON struct {
	Name  string  `json:"name"`
	Value *string `json:"value,omitempty"`
}

// outputJSON is the runtimeapi.DNSConfig kubelet returned, with options
// sorted (see the package comment).
type outputJSON struct {
	Servers  []string `json:"servers"`
	Searches []string `json:"searches"`
	Options  []string `json:"options"`
}

func main() {
	out := flag.String("out", "kubelet-outputs.json", "file to write the fixture to")
	seed := flag.Uint64("seed", defaultSeed, "seed of the pseudo-random cases; the committed fixture uses the default")
	n := flag.Int("random", 300, "number of pseudo-random cases")
	flag.Parse()
	if err := run(*out, *seed, *n); err != nil {
		fmt.Fprintf(os.Stderr, "kubeletdns: %v\n", err)
		os.Exit(1)
	}
}

func run(out string, seed uint64, n int) error {
	dir, err := os.MkdirTemp("", "kubeletdns-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	cases := append(handWritten(), randomCases(seed, n)...)
	seen := map[string]bool{}
	stats := map[string]int{}
	for i := range cases {
		c := &cases[i]
		if seen[c.Name] {
			return fmt.Errorf("duplicate case name %q", c.Name)
		}
		seen[c.Name] = true
		events, err := call(c, filepath.Join(dir, "resolv.conf"))
		if err != nil {
			return fmt.Errorf("case %q: %w", c.Name, err)
		}
		if c.Error != "" {
			stats["error"]++
		}
		for _, e := range events {
			stats[e]++
		}
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(fixture{Kubelet: kubeletVersion, Cases: cases}); err != nil {
		return err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "kubeletdns: wrote %d cases (%d hand-written, %d random) to %s\n", len(cases), len(cases)-n, n, out)
	for _, k := range slices.Sorted(maps.Keys(stats)) {
		fmt.Fprintf(os.Stderr, "kubeletdns:   cases with %-30s %d\n", k, stats[k])
	}
	return nil
}

// call runs kubelet's Configurer for c and fills c.Output or c.Error. It
// returns the kinds of event kubelet recorded, for the summary on stderr;
// events are not part of the fixture.
func call(c *caseJSON, resolvPath string) ([]string, error) {
	normalise(c)
	resolverConfig := ""
	if c.Node.ResolvConfDisabled {
		if c.Node.ResolvConf != "" {
			return nil, fmt.Errorf("resolvConf text given with resolvConfDisabled")
		}
	} else {
		if err := os.WriteFile(resolvPath, []byte(c.Node.ResolvConf), 0o644); err != nil {
			return nil, err
		}
		resolverConfig = resolvPath
	}
	clusterDNS, err := parseIPs(c.Node.ClusterDNS)
	if err != nil {
		return nil, fmt.Errorf("clusterDNS: %w", err)
	}
	nodeIPs, err := parseIPs(c.Node.NodeIPs)
	if err != nil {
		return nil, fmt.Errorf("nodeIPs: %w", err)
	}

	// Each call gets its own recorder: GetPodDNS records at most two
	// MissingClusterDNS and two DNSConfigForming events.
	recorder := record.NewFakeRecorder(16)
	nodeRef := &v1.ObjectReference{Kind: "Node", Name: "node-1", UID: types.UID("node-1")}
	configurer := dns.NewConfigurer(recorder, nodeRef, nodeIPs, clusterDNS, c.Node.ClusterDomain, resolverConfig)
	// kubelet logs limit and policy problems; they are not part of the fixture.
	ctx := klog.NewContext(context.Background(), logr.Discard())
	got, err := configurer.GetPodDNS(ctx, toPod(c.Pod))
	if err != nil {
		c.Error = err.Error()
		if c.Error == "" {
			return nil, fmt.Errorf("kubelet returned an error with empty text")
		}
		c.Output = nil
	} else {
		if got == nil {
			return nil, fmt.Errorf("kubelet returned neither config nor error")
		}
		options := slices.Clone(got.Options)
		slices.Sort(options)
		c.Output = &outputJSON{
			Servers:  nonNil(got.Servers),
			Searches: nonNil(got.Searches),
			Options:  nonNil(options),
		}
	}
	close(recorder.Events)
	var events []string
	for e := range recorder.Events {
		// "Warning DNSConfigForming Search Line limits were exceeded, ..."
		// → "DNSConfigForming Search"; one entry per kind and case.
		f := strings.Fields(e)
		key := "event " + strings.Join(f[1:min(3, len(f))], " ")
		if f[1] == "MissingClusterDNS" {
			key = "event MissingClusterDNS"
		}
		if !slices.Contains(events, key) {
			events = append(events, key)
		}
	}
	return events, nil
}

// parseIPs reads IPs the way kubelet reads clusterDNS from its
// configuration (netutils.ParseIPSloppy). Unlike kubelet, which logs and
// skips a bad entry, it refuses one, so the fixture never lists an address
// kubelet did not get.
func parseIPs(ss []string) ([]net.IP, error) {
	var ips []net.IP
	for _, s := range ss {
		ip := netutils.ParseIPSloppy(s)
		if ip == nil {
			return nil, fmt.Errorf("invalid IP %q", s)
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

// toPod builds the v1.Pod GetPodDNS reads.
func toPod(p podJSON) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      p.Name,
			Namespace: p.Namespace,
			UID:       types.UID(p.Namespace + "/" + p.Name),
		},
		Spec: v1.PodSpec{
			DNSPolicy:   v1.DNSPolicy(p.DNSPolicy),
			HostNetwork: p.HostNetwork,
		},
	}
	if d := p.DNSConfig; d != nil {
		cfg := &v1.PodDNSConfig{
			Nameservers: slices.Clone(d.Nameservers),
			Searches:    slices.Clone(d.Searches),
		}
		for _, o := range d.Options {
			opt := v1.PodDNSConfigOption{Name: o.Name}
			if o.Value != nil {
				v := *o.Value
				opt.Value = &v
			}
			cfg.Options = append(cfg.Options, opt)
		}
		pod.Spec.DNSConfig = cfg
	}
	return pod
}

// normalise writes empty lists as [] rather than null; only a nil
// dnsConfig stays null.
func normalise(c *caseJSON) {
	c.Node.ClusterDNS = nonNil(c.Node.ClusterDNS)
	c.Node.NodeIPs = nonNil(c.Node.NodeIPs)
	if d := c.Pod.DNSConfig; d != nil {
		d.Nameservers = nonNil(d.Nameservers)
		d.Searches = nonNil(d.Searches)
		if d.Options == nil {
			d.Options = []optionJSON{}
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
