// Command kubeletdns runs kubelet's own pod DNS code over a table of cases
// and writes what kubelet returned as plain JSON.
//
// The code is Configurer.GetPodDNS of
// k8s.io/kubernetes/pkg/kubelet/network/dns, and the sandbox hostname
// kubelet derives beside it (Kubelet.GeneratePodHostNameAndDomain, then
// util.GetNodenameForKernel, as kuberuntime's generatePodSandboxConfig
// does), with kubelet's default feature gates. The cases are hand-written
// ones and a fixed-seed set of pseudo-random ones. pkg/policy tests its
// engine and the engine's inverse against that file
// (pkg/policy/testdata/kubelet-outputs-<version>.json, one per Kubernetes
// release) without importing any k8s.io package.
//
// The generator only builds inputs and records outputs: every server,
// search, option, event and name in the file comes from kubelet. The one
// change it makes is to sort the options, which kubelet builds from a Go map
// and so returns in a random order; the servers and searches keep kubelet's
// order.
//
// Usage, from test/testbin:
//
//	go run ./kubeletdns -dir ../../pkg/policy/testdata
package main

//go:generate go run . -dir ../../../pkg/policy/testdata

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"unsafe"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet"
	"k8s.io/kubernetes/pkg/kubelet/network/dns"
	kubeletutil "k8s.io/kubernetes/pkg/kubelet/util"
	netutils "k8s.io/utils/net"
)

// kubernetesModule is the module whose kubelet code the fixture records;
// its version (from the binary's build info) names the fixture.
const kubernetesModule = "k8s.io/kubernetes"

// fixture is the file's top level.
type fixture struct {
	Kubelet string     `json:"kubelet"`
	Cases   []caseJSON `json:"cases"`
}

// caseJSON is one pod on one node: the node's kubelet settings, the pod,
// kubelet's DNS answer (Output) or its error (Error, with Output null), the
// events GetPodDNS recorded, and the sandbox names (Names) or their error
// (NamesError, with Names null). A hostNetwork pod has no sandbox names:
// kubelet leaves it the node's hostname.
type caseJSON struct {
	Name       string      `json:"name"`
	Node       nodeJSON    `json:"node"`
	Pod        podJSON     `json:"pod"`
	Output     *outputJSON `json:"output"`
	Error      string      `json:"error"`
	Events     []string    `json:"events,omitempty"`
	Names      *namesJSON  `json:"names"`
	NamesError string      `json:"namesError"`
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

// podJSON holds the pod fields GetPodDNS and the sandbox names read.
// DNSConfig nil is a pod without spec.dnsConfig, which kubelet treats
// differently from an empty one; HostnameOverride nil is a pod without
// spec.hostnameOverride.
type podJSON struct {
	Name              string         `json:"name"`
	Namespace         string         `json:"namespace"`
	DNSPolicy         string         `json:"dnsPolicy"`
	HostNetwork       bool           `json:"hostNetwork"`
	DNSConfig         *dnsConfigJSON `json:"dnsConfig"`
	Hostname          string         `json:"hostname,omitempty"`
	Subdomain         string         `json:"subdomain,omitempty"`
	HostnameOverride  *string        `json:"hostnameOverride,omitempty"`
	SetHostnameAsFQDN bool           `json:"setHostnameAsFQDN,omitempty"`
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

// namesJSON is what kubelet names a pod's sandbox: the hostname and domain
// of GeneratePodHostNameAndDomain, and the PodSandboxConfig.Hostname
// GetNodenameForKernel makes of them (the FQDN with setHostnameAsFQDN).
type namesJSON struct {
	Hostname       string `json:"hostname"`
	Domain         string `json:"domain"`
	KernelHostname string `json:"kernelHostname"`
}

func main() {
	dir := flag.String("dir", ".", "directory to write kubelet-outputs-<k8s.io/kubernetes version>.json to")
	out := flag.String("out", "", "file to write the fixture to, instead of the one -dir names")
	seed := flag.Uint64("seed", defaultSeed, "seed of the pseudo-random cases; the committed fixture uses the default")
	n := flag.Int("random", 300, "number of pseudo-random cases")
	flag.Parse()
	if err := run(*dir, *out, *seed, *n); err != nil {
		fmt.Fprintf(os.Stderr, "kubeletdns: %v\n", err)
		os.Exit(1)
	}
}

// kubernetesVersion is the version of kubernetesModule this binary was
// built with, so that the fixture names the code it comes from without a
// constant to keep in step with go.mod.
func kubernetesVersion() (string, error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("no build info: build with module support")
	}
	for _, d := range bi.Deps {
		if d.Path != kubernetesModule {
			continue
		}
		if d.Replace != nil {
			d = d.Replace
		}
		return d.Version, nil
	}
	return "", fmt.Errorf("build info lists no %s", kubernetesModule)
}

func run(dir, out string, seed uint64, n int) error {
	version, err := kubernetesVersion()
	if err != nil {
		return err
	}
	if out == "" {
		out = filepath.Join(dir, "kubelet-outputs-"+version+".json")
	}
	// kubelet before 1.36 logs a truncated hostname through the global klog.
	klog.SetLogger(logr.Discard())
	tmp, err := os.MkdirTemp("", "kubeletdns-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	cases := append(handWritten(), randomCases(seed, n)...)
	seen := map[string]bool{}
	stats := map[string]int{}
	for i := range cases {
		c := &cases[i]
		if seen[c.Name] {
			return fmt.Errorf("duplicate case name %q", c.Name)
		}
		seen[c.Name] = true
		events, err := call(c, filepath.Join(tmp, "resolv.conf"))
		if err != nil {
			return fmt.Errorf("case %q: %w", c.Name, err)
		}
		if c.Error != "" {
			stats["error"]++
		}
		if c.NamesError != "" {
			stats["names error"]++
		}
		for _, e := range events {
			stats[e]++
		}
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(fixture{Kubelet: kubernetesModule + " " + version, Cases: cases}); err != nil {
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

// call runs kubelet's Configurer for c and fills c.Output or c.Error,
// c.Events, and c.Names or c.NamesError. It returns the kinds of event
// kubelet recorded, for the summary on stderr.
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
	pod := toPod(c.Pod)
	got, err := configurer.GetPodDNS(ctx, pod)
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
	c.Names, err = sandboxNames(configurer, pod)
	if err != nil {
		c.NamesError = err.Error()
		if c.NamesError == "" {
			return nil, fmt.Errorf("kubelet returned a names error with empty text")
		}
	}
	close(recorder.Events)
	var events []string
	for e := range recorder.Events {
		c.Events = append(c.Events, e)
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

// hostnameGenerator is Kubelet.GeneratePodHostNameAndDomain: from kubelet
// 1.36 it takes a logger, before it does not.
type (
	hostnameGenerator interface {
		GeneratePodHostNameAndDomain(klog.Logger, *v1.Pod) (string, string, error)
	}
	hostnameGeneratorNoLogger interface {
		GeneratePodHostNameAndDomain(*v1.Pod) (string, string, error)
	}
)

// sandboxNames is what kuberuntime's generatePodSandboxConfig does for the
// sandbox hostname: nothing for a hostNetwork pod, else
// GeneratePodHostNameAndDomain, then GetNodenameForKernel.
func sandboxNames(configurer *dns.Configurer, pod *v1.Pod) (*namesJSON, error) {
	if pod.Spec.HostNetwork {
		return nil, nil
	}
	// GeneratePodHostNameAndDomain reads only the Kubelet's dnsConfigurer
	// (its ClusterDomain) and the feature gates; the field is unexported
	// and building a whole Kubelet is out of the question here.
	kl := &kubelet.Kubelet{}
	f := reflect.ValueOf(kl).Elem().FieldByName("dnsConfigurer")
	if !f.IsValid() || f.Type() != reflect.TypeOf(configurer) {
		return nil, fmt.Errorf("kubelet.Kubelet has no dnsConfigurer field of type %T", configurer)
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(configurer))

	var hostname, domain string
	var err error
	switch g := any(kl).(type) {
	case hostnameGenerator:
		hostname, domain, err = g.GeneratePodHostNameAndDomain(logr.Discard(), pod)
	case hostnameGeneratorNoLogger:
		hostname, domain, err = g.GeneratePodHostNameAndDomain(pod)
	default:
		return nil, errors.New("kubelet.Kubelet has no GeneratePodHostNameAndDomain of a known signature")
	}
	if err != nil {
		return nil, err
	}
	kernel, err := kubeletutil.GetNodenameForKernel(hostname, domain, pod.Spec.SetHostnameAsFQDN)
	if err != nil {
		return nil, err
	}
	return &namesJSON{Hostname: hostname, Domain: domain, KernelHostname: kernel}, nil
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
			Hostname:    p.Hostname,
			Subdomain:   p.Subdomain,
		},
	}
	if p.HostnameOverride != nil {
		h := *p.HostnameOverride
		pod.Spec.HostnameOverride = &h
	}
	if p.SetHostnameAsFQDN {
		pod.Spec.SetHostnameAsFQDN = &p.SetHostnameAsFQDN
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
