package policy

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// kubeletFixture is testdata/kubelet-outputs.json: pods, node settings and
// node resolver files run through kubelet's own Configurer.GetPodDNS
// (test/testbin/kubeletdns), so the engine and its inverse are checked
// against something they did not produce.
type kubeletFixture struct {
	Kubelet string `json:"kubelet"`
	Cases   []struct {
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
		} `json:"pod"`
		Output *struct {
			Servers  []string `json:"servers"`
			Searches []string `json:"searches"`
			Options  []string `json:"options"`
		} `json:"output"`
		Error string `json:"error"`
	} `json:"cases"`
}

// TestKubeletOutputs checks every case of the fixture: Compute gives what
// kubelet gave (kubelet orders merged options by a Go map, so options are
// compared as sets), and Recover on kubelet's output gives back an input
// that recomputes to it, with the pod's own policy type.
func TestKubeletOutputs(t *testing.T) {
	data, err := os.ReadFile("testdata/kubelet-outputs.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx kubeletFixture
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatal(err)
	}
	if len(fx.Cases) < 100 {
		t.Fatalf("fixture from %q has %d cases", fx.Kubelet, len(fx.Cases))
	}
	recovered := map[Type]int{}
	for _, c := range fx.Cases {
		t.Run(c.Name, func(t *testing.T) {
			e, err := New(Node{ClusterDNS: c.Node.ClusterDNS, ClusterDomain: c.Node.ClusterDomain, NodeIPs: c.Node.NodeIPs})
			if err != nil {
				t.Fatal(err)
			}
			host := Host{Disabled: true}
			if !c.Node.ResolvConfDisabled {
				cfg, err := resolvconf.ParseBytes([]byte(c.Node.ResolvConf))
				host = HostOf(cfg)
				host.Err = err
			}
			in := Input{Name: c.Pod.Name, Namespace: c.Pod.Namespace, Policy: Policy(c.Pod.DNSPolicy), HostNetwork: c.Pod.HostNetwork}
			if d := c.Pod.DNSConfig; d != nil {
				in.DNSConfig = &DNSConfig{Nameservers: d.Nameservers, Searches: d.Searches}
				for _, o := range d.Options {
					in.DNSConfig.Options = append(in.DNSConfig.Options, Option{Name: o.Name, Value: o.Value})
				}
			}
			in.HostNetwork = c.Pod.HostNetwork
			res, err := e.Compute(in, host)
			if c.Error != "" || c.Output == nil {
				if err == nil {
					t.Fatalf("kubelet failed with %q; Compute gave %+v", c.Error, res.Config())
				}
				return
			}
			if err != nil {
				t.Fatalf("Compute: %v; kubelet gave %+v", err, *c.Output)
			}
			out := Output{Nameservers: nonNil(c.Output.Servers), Searches: nonNil(c.Output.Searches), Options: nonNil(c.Output.Options)}
			if !slices.Equal(res.Nameservers, out.Nameservers) || !slices.Equal(res.Searches, out.Searches) || !sameSet(res.Options, out.Options) {
				t.Fatalf("Compute  %q %q %q\nkubelet  %q %q %q", res.Nameservers, res.Searches, res.Options, out.Nameservers, out.Searches, out.Options)
			}
			// Recover works on the output as the runtime receives it, with
			// kubelet's options in an order of their own (sorted here).
			rec, ok := e.Recover(Input{Name: in.Name, Namespace: in.Namespace, HostNetwork: in.HostNetwork}, out, host)
			again, err := e.Compute(rec, host)
			if err != nil {
				t.Fatalf("Compute(Recover): %v", err)
			}
			if !slices.Equal(again.Nameservers, out.Nameservers) || !slices.Equal(again.Searches, out.Searches) || !sameSet(again.Options, out.Options) {
				t.Fatalf("Compute(Recover(kubelet)) %q %q %q\nkubelet                 %q %q %q\nrecovered %+v", again.Nameservers, again.Searches, again.Options, out.Nameservers, out.Searches, out.Options, rec)
			}
			if in.Policy != None && (!ok || again.Type != res.Type) {
				t.Fatalf("%s pod recovered as %s (ok %v): type %s, want %s", in.Policy, rec.Policy, ok, again.Type, res.Type)
			}
			recovered[again.Type]++
		})
	}
	t.Logf("%d kubelet outputs from %s; recovered types %v", len(fx.Cases), fx.Kubelet, recovered)
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
