package policy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// kubeletFixture is a testdata/kubelet-outputs-<version>.json: pods, node
// settings and node resolver files run through the kubelet of one
// Kubernetes release (Configurer.GetPodDNS, and GeneratePodHostNameAndDomain
// with GetNodenameForKernel for the sandbox hostname; test/testbin/
// kubeletdns), so the engine and its inverse are checked against something
// they did not produce.
type kubeletFixture struct {
	Kubelet string        `json:"kubelet"`
	Cases   []kubeletCase `json:"cases"`
}

type kubeletCase struct {
	Name string `json:"name"`
	Node struct {
		ClusterDNS         []string `json:"clusterDNS"`
		ClusterDomain      string   `json:"clusterDomain"`
		NodeIPs            []string `json:"nodeIPs"`
		ResolvConf         string   `json:"resolvConf"`
		ResolvConfDisabled bool     `json:"resolvConfDisabled"`
	} `json:"node"`
	Pod struct {
		Name        string `json:"name"`
		Namespace   string `json:"namespace"`
		DNSPolicy   string `json:"dnsPolicy"`
		HostNetwork bool   `json:"hostNetwork"`
		DNSConfig   *struct {
			Nameservers []string `json:"nameservers"`
			Searches    []string `json:"searches"`
			Options     []struct {
				Name  string  `json:"name"`
				Value *string `json:"value"`
			} `json:"options"`
		} `json:"dnsConfig"`
		Hostname          string  `json:"hostname"`
		Subdomain         string  `json:"subdomain"`
		HostnameOverride  *string `json:"hostnameOverride"`
		SetHostnameAsFQDN bool    `json:"setHostnameAsFQDN"`
	} `json:"pod"`
	Output *struct {
		Servers  []string `json:"servers"`
		Searches []string `json:"searches"`
		Options  []string `json:"options"`
	} `json:"output"`
	Error  string   `json:"error"`
	Events []string `json:"events"`
	Names  *struct {
		Hostname       string `json:"hostname"`
		Domain         string `json:"domain"`
		KernelHostname string `json:"kernelHostname"`
	} `json:"names"`
	NamesError string `json:"namesError"`
}

// kubeletModule prefixes a fixture's kubelet field.
const kubeletModule = "k8s.io/kubernetes "

// loadKubeletFixtures reads every testdata/kubelet-outputs-<version>.json,
// keyed by version; each file must name the release it holds.
func loadKubeletFixtures(t *testing.T) map[string]kubeletFixture {
	t.Helper()
	files, err := filepath.Glob("testdata/kubelet-outputs-*.json")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]kubeletFixture{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx kubeletFixture
		if err := json.Unmarshal(data, &fx); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		version, ok := strings.CutPrefix(fx.Kubelet, kubeletModule)
		if !ok || filepath.Base(f) != "kubelet-outputs-"+version+".json" {
			t.Fatalf("%s holds kubelet %q", f, fx.Kubelet)
		}
		if len(fx.Cases) < 100 {
			t.Fatalf("%s has %d cases", f, len(fx.Cases))
		}
		out[version] = fx
	}
	// The oldest release CI tests and the newest.
	for _, v := range []string{"v1.34.4", "v1.37.2"} {
		if _, ok := out[v]; !ok {
			t.Fatalf("no testdata/kubelet-outputs-%s.json (have %d fixtures)", v, len(out))
		}
	}
	return out
}

// TestKubeletOutputs checks every case of every fixture with an engine for
// the fixture's kubelet version: Compute gives what kubelet gave (kubelet
// orders merged options by a Go map, so options are compared as sets), its
// warnings say what kubelet's events said, its hostname and FQDN are the
// sandbox's, and Recover on kubelet's output gives back an input that
// recomputes to it, with the pod's own policy type.
func TestKubeletOutputs(t *testing.T) {
	for version, fx := range loadKubeletFixtures(t) {
		t.Run(version, func(t *testing.T) {
			recovered := map[Type]int{}
			for _, c := range fx.Cases {
				t.Run(c.Name, func(t *testing.T) {
					if typ, ok := checkKubeletCase(t, version, c); ok {
						recovered[typ]++
					}
				})
			}
			t.Logf("%d kubelet outputs from %s; recovered types %v", len(fx.Cases), fx.Kubelet, recovered)
		})
	}
}

// checkKubeletCase checks one case (TestKubeletOutputs) and returns the
// type Recover's input recomputed to.
func checkKubeletCase(t *testing.T, version string, c kubeletCase) (Type, bool) {
	t.Helper()
	e, err := New(Node{ClusterDNS: c.Node.ClusterDNS, ClusterDomain: c.Node.ClusterDomain, NodeIPs: c.Node.NodeIPs, KubeletVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	host := Host{Disabled: true}
	if !c.Node.ResolvConfDisabled {
		cfg, err := resolvconf.ParseBytes([]byte(c.Node.ResolvConf))
		host = HostOf(cfg)
		host.Err = err
	}
	p := c.Pod
	in := Input{Name: p.Name, Namespace: p.Namespace, Policy: Policy(p.DNSPolicy), HostNetwork: p.HostNetwork,
		Hostname: p.Hostname, Subdomain: p.Subdomain, HostnameOverride: p.HostnameOverride, SetHostnameAsFQDN: p.SetHostnameAsFQDN}
	if d := p.DNSConfig; d != nil {
		in.DNSConfig = &DNSConfig{Nameservers: d.Nameservers, Searches: d.Searches}
		for _, o := range d.Options {
			in.DNSConfig.Options = append(in.DNSConfig.Options, Option{Name: o.Name, Value: o.Value})
		}
	}
	res, err := e.Compute(in, host)
	if c.Error != "" || c.Output == nil {
		if !errors.Is(err, ErrHostConfig) {
			t.Fatalf("kubelet failed with %q; Compute gave %+v, %v", c.Error, res.Config(), err)
		}
		return "", false
	}
	checkKubeletNames(t, c, res, err)
	out := Output{Nameservers: nonNil(c.Output.Servers), Searches: nonNil(c.Output.Searches), Options: nonNil(c.Output.Options)}
	if !slices.Equal(res.Nameservers, out.Nameservers) || !slices.Equal(res.Searches, out.Searches) || !sameSet(res.Options, out.Options) {
		t.Fatalf("Compute  %q %q %q\nkubelet  %q %q %q", res.Nameservers, res.Searches, res.Options, out.Nameservers, out.Searches, out.Options)
	}
	if got, want := eventWarnings(res.Warnings), kubeletEvents(c.Events); !slices.Equal(got, want) {
		t.Fatalf("warnings %q\nkubelet's events %q", got, want)
	}
	// Recover works on the output as the runtime receives it, with
	// kubelet's options in an order of their own (sorted here).
	rec, ok := e.Recover(Input{Name: in.Name, Namespace: in.Namespace, HostNetwork: in.HostNetwork}, out, host)
	again, err := e.Compute(rec, host)
	if err != nil && c.NamesError == "" { // a pod kubelet cannot name fails again, with its DNS config
		t.Fatalf("Compute(Recover): %v", err)
	}
	if !slices.Equal(again.Nameservers, out.Nameservers) || !slices.Equal(again.Searches, out.Searches) || !sameSet(again.Options, out.Options) {
		t.Fatalf("Compute(Recover(kubelet)) %q %q %q\nkubelet                 %q %q %q\nrecovered %+v", again.Nameservers, again.Searches, again.Options, out.Nameservers, out.Searches, out.Options, rec)
	}
	if in.Policy != None && (!ok || again.Type != res.Type) {
		t.Fatalf("%s pod recovered as %s (ok %v): type %s, want %s", in.Policy, rec.Policy, ok, again.Type, res.Type)
	}
	return again.Type, true
}

// checkKubeletNames compares the engine's hostname and FQDN (res, or its
// error err) with the sandbox names kubelet gave. Errors are compared up to
// the first ": ": the engine's name checks word their reasons more briefly
// than k8s.io/apimachinery's.
func checkKubeletNames(t *testing.T, c kubeletCase, res Result, err error) {
	t.Helper()
	switch {
	case c.NamesError != "":
		if err == nil || errors.Is(err, ErrHostConfig) {
			t.Fatalf("kubelet's names failed with %q; Compute gave hostname %q, %v", c.NamesError, res.Hostname, err)
		}
		got, _, _ := strings.Cut(err.Error(), ": ")
		want, _, _ := strings.Cut(c.NamesError, ": ")
		if got != want {
			t.Fatalf("error %q\nkubelet %q", err, c.NamesError)
		}
	case err != nil:
		t.Fatalf("Compute: %v; kubelet named the sandbox %+v", err, c.Names)
	case c.Names == nil:
		if res.Hostname != "" || res.FQDN != "" {
			t.Fatalf("hostNetwork pod: hostname %q, FQDN %q; kubelet sets none", res.Hostname, res.FQDN)
		}
	default:
		fqdn := ""
		if c.Names.Domain != "" {
			fqdn = c.Names.Hostname + "." + c.Names.Domain
		}
		if res.Hostname != c.Names.KernelHostname || res.FQDN != fqdn {
			t.Fatalf("hostname %q, FQDN %q; kubelet %+v", res.Hostname, res.FQDN, *c.Names)
		}
	}
}

// kubeletPodPrefix is the start of the pod's copy of kubelet's
// MissingClusterDNS event: `pod: "<name>_<ns>(<uid>)". `.
var kubeletPodPrefix = regexp.MustCompile(`^pod: ".*?"\. `)

// kubeletEvents is "<reason> <message>" of each distinct event kubelet
// recorded ("Warning <reason> <message>"), the pod's copy of an event
// folded into the node's, sorted.
func kubeletEvents(events []string) []string {
	var out []string
	for _, ev := range events {
		f := strings.SplitN(ev, " ", 3)
		out = append(out, f[1]+" "+kubeletPodPrefix.ReplaceAllString(f[2], ""))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// eventWarnings is "<reason> <message>" of the warnings kubelet records as
// events, sorted.
func eventWarnings(ws []Warning) []string {
	var out []string
	for _, w := range ws {
		if w.Reason == ReasonDNSConfigForming || w.Reason == ReasonMissingClusterDNS {
			out = append(out, w.Reason+" "+w.Message)
		}
	}
	slices.Sort(out)
	return out
}

// TestKubeletReleasesDiffer: each fixture differs from the newest
// (v1.37.2) exactly where a release-dependent rule says
// (Release.hostnameOverride: a pod off the host network with
// spec.hostnameOverride, before 1.35); everything else, the DNS config and
// the events included, is the same.
func TestKubeletReleasesDiffer(t *testing.T) {
	fxs := loadKubeletFixtures(t)
	newest := byName(fxs["v1.37.2"])
	for version, fx := range fxs {
		t.Run(version, func(t *testing.T) {
			rel, err := ParseRelease(version)
			if err != nil {
				t.Fatal(err)
			}
			old := byName(fx)
			if len(old) != len(newest) {
				t.Fatalf("%d cases, v1.37.2 has %d", len(old), len(newest))
			}
			var differ, want []string
			for name, o := range old {
				n, ok := newest[name]
				if !ok {
					t.Fatalf("case %q not in v1.37.2", name)
				}
				if o.Pod.HostnameOverride != nil && !o.Pod.HostNetwork && !rel.hostnameOverride() {
					want = append(want, name)
				}
				ob, _ := json.Marshal(o)
				nb, _ := json.Marshal(n)
				if string(ob) != string(nb) {
					differ = append(differ, name)
				}
			}
			slices.Sort(differ)
			slices.Sort(want)
			if !reflect.DeepEqual(differ, want) {
				t.Errorf("kubelet %s and v1.37.2 differ in %q\nwant %q", version, differ, want)
			}
			if !rel.hostnameOverride() && len(want) < 5 {
				t.Errorf("only %d hostnameOverride cases", len(want))
			}
		})
	}
}

func byName(fx kubeletFixture) map[string]kubeletCase {
	m := make(map[string]kubeletCase, len(fx.Cases))
	for _, c := range fx.Cases {
		m[c.Name] = c
	}
	return m
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}
