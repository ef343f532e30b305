package podfacts

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

func TestFromSandboxRecoversPolicy(t *testing.T) {
	eng, err := policy.New(policy.Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	cluster := []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local"}
	many := func(n int) []string {
		var s []string
		for i := 0; i < n; i++ {
			s = append(s, fmt.Sprintf("h%02d.example", i))
		}
		return s
	}
	cases := []struct {
		name       string
		host       []string
		dns        *policy.Output
		wantPolicy policy.Policy
		wantSearch []string // pod searches recovered (ClusterFirst only)
	}{
		{"ClusterFirst with the node's searches and a pod search", []string{"corp.example"},
			&policy.Output{Nameservers: []string{"10.96.0.10"}, Searches: append(append([]string{}, cluster...), "corp.example", "extra.example"), Options: []string{"ndots:5"}},
			policy.ClusterFirst, []string{"extra.example"}},
		{"None shaped like ClusterFirst but without the node's searches", []string{"corp.example"},
			&policy.Output{Nameservers: []string{"10.96.0.10"}, Searches: cluster, Options: []string{"ndots:2"}},
			policy.None, nil},
		{"no node searches: the shapes are the same config", nil,
			&policy.Output{Nameservers: []string{"10.96.0.10"}, Searches: cluster, Options: []string{"ndots:5"}},
			policy.ClusterFirst, nil},
		{"node searches equal to a cluster search are not expected twice", []string{"cluster.local", "corp.example"},
			&policy.Output{Nameservers: []string{"10.96.0.10"}, Searches: append(append([]string{}, cluster...), "corp.example"), Options: []string{"ndots:5"}},
			policy.ClusterFirst, nil},
		{"a list kubelet trimmed at 32 entries inside the node's searches", many(40),
			&policy.Output{Nameservers: []string{"10.96.0.10"}, Searches: append(append([]string{}, cluster...), many(29)...), Options: []string{"ndots:5"}},
			policy.ClusterFirst, nil},
		{"host-shaped config (Default)", []string{"corp.example"},
			&policy.Output{Nameservers: []string{"192.0.2.1"}, Searches: []string{"corp.example"}},
			policy.Default, nil},
		{"host-shaped config from another host file (None)", []string{"corp.example"},
			&policy.Output{Nameservers: []string{"192.0.2.9"}, Searches: []string{"corp.example"}},
			policy.None, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := Sandbox{Name: "p", Namespace: "shop", UID: "u", DNS: tc.dns}
			in, err := FromSandbox(sb, eng, policy.Host{Nameservers: []string{"192.0.2.1"}, Searches: tc.host})
			if err != nil {
				t.Fatal(err)
			}
			if in.Policy != tc.wantPolicy {
				t.Fatalf("policy %q, want %q", in.Policy, tc.wantPolicy)
			}
			if tc.wantPolicy == policy.ClusterFirst {
				var got []string
				if in.DNSConfig != nil {
					got = in.DNSConfig.Searches
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.wantSearch) {
					t.Errorf("pod searches %v, want %v", got, tc.wantSearch)
				}
			}
			// Whatever was recovered, rendering it again with the same
			// node gives kubelet's config back.
			r, err := eng.Compute(in, policy.Host{Nameservers: []string{"192.0.2.1"}, Searches: tc.host})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(r.Searches) != fmt.Sprint(tc.dns.Searches) || fmt.Sprint(r.Nameservers) != fmt.Sprint(tc.dns.Nameservers) {
				t.Errorf("re-rendered %v %v, want kubelet's %v %v", r.Nameservers, r.Searches, tc.dns.Nameservers, tc.dns.Searches)
			}
		})
	}
}

// Without the API server (the sandbox config alone), the namespace label is
// unknown: the cluster default and the annotation decide.
func TestFromSandboxClusterDefault(t *testing.T) {
	two := 2
	n := testNode
	n.DefaultPolicy, n.Ndots = policy.ClusterFirstWithAutopath, &two
	eng, err := policy.New(n)
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := policy.New(testNode)
	if err != nil {
		t.Fatal(err)
	}
	host := policy.Host{Nameservers: []string{"192.0.2.53"}, Searches: []string{"corp.example"}}
	for _, tc := range []struct {
		name     string
		pod      policy.Input
		wantType policy.Type
		wantOpts []string
	}{
		{"ClusterFirst", policy.Input{Policy: policy.ClusterFirst}, policy.TypeAutopath, []string{"ndots:2"}},
		{"annotation opts out", policy.Input{Policy: policy.ClusterFirst, PolicyAnnotation: "ClusterFirst"}, policy.TypeCluster, []string{"ndots:2"}},
		{"hostNetwork", policy.Input{Policy: policy.ClusterFirstWithHostNet, HostNetwork: true}, policy.TypeCluster, []string{"ndots:2"}},
		{"Default", policy.Input{Policy: policy.Default}, policy.TypeHost, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.pod.Name, tc.pod.Namespace, tc.pod.UID = "p", "team", "uid-p"
			in, err := FromSandbox(kubeletSandbox(t, kubelet, host, tc.pod), eng, host)
			if err != nil {
				t.Fatal(err)
			}
			res, err := eng.Compute(in, host)
			if err != nil {
				t.Fatal(err)
			}
			if res.Type != tc.wantType || !slices.Equal(res.Options, tc.wantOpts) {
				t.Errorf("got %s %q, want %s %q", res.Type, res.Options, tc.wantType, tc.wantOpts)
			}
		})
	}
}

// testNode is the node of the unit tests.
var testNode = testkit.NodeWithNodeLocal()

// kubeletSandbox is the sandbox kubelet makes for pod: kubelet's DNS (the
// engine without the autopath annotation, which kubelet does not know)
// with its options in an order of its own (kubelet renders them from a
// map; reversed here), its hostname, and the pod's annotations.
func kubeletSandbox(t *testing.T, eng *policy.Engine, host policy.Host, pod policy.Input) Sandbox {
	t.Helper()
	res := testkit.KubeletDNS(t, eng, host, pod)
	sb := Sandbox{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, HostNetwork: pod.HostNetwork, Hostname: res.Hostname,
		DNS: &policy.Output{Nameservers: res.Nameservers, Searches: res.Searches, Options: res.Options}}
	if pod.PolicyAnnotation != "" {
		sb.Annotations = map[string]string{policy.AnnotationDNSPolicy: pod.PolicyAnnotation, "other": "x"}
	}
	return sb
}

// TestFromSandboxFacts: what FromSandbox takes from the sandbox as it is,
// and the sandboxes it refuses.
func TestFromSandboxFacts(t *testing.T) {
	eng, err := policy.New(testNode)
	if err != nil {
		t.Fatal(err)
	}
	host := policy.Host{Nameservers: []string{"192.0.2.53"}}
	dns := &policy.Output{Nameservers: []string{"192.0.2.53"}}
	ap := string(policy.ClusterFirstWithAutopath)
	tests := []struct {
		name         string
		sb           Sandbox
		wantErr      error // nil: no error; errAny: some error
		wantHostname string
		wantHostNet  bool
		wantPolicy   string // the annotation's value
	}{
		{"kubelet's hostname kept", Sandbox{Namespace: "team", Name: "p", UID: "u", Hostname: "web-0", DNS: dns}, nil, "web-0", false, ""},
		{"no hostname", Sandbox{Namespace: "team", Name: "p", UID: "u", DNS: dns}, nil, "", false, ""},
		{"host network keeps the node's hostname", Sandbox{Namespace: "team", Name: "p", UID: "u", Hostname: "node-1", HostNetwork: true, DNS: dns}, nil, "", true, ""},
		{"autopath annotation", Sandbox{Namespace: "team", Name: "p", UID: "u", DNS: dns, Annotations: map[string]string{policy.AnnotationDNSPolicy: ap}}, nil, "", false, ap},
		{"no dns config", Sandbox{Namespace: "team", Name: "p", UID: "u"}, ErrNoDNSConfig, "", false, ""},
		{"no name", Sandbox{Namespace: "team", UID: "u", DNS: dns}, errAny, "", false, ""},
		{"no uid", Sandbox{Namespace: "team", Name: "p", DNS: dns}, errAny, "", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := FromSandbox(tt.sb, eng, host)
			switch {
			case tt.wantErr == errAny:
				if err == nil {
					t.Fatalf("FromSandbox = %+v, want an error", in)
				}
				return
			case !errors.Is(err, tt.wantErr):
				t.Fatalf("FromSandbox error %v, want %v", err, tt.wantErr)
			case err != nil:
				return
			}
			got := ""
			if in.HostnameOverride != nil {
				got = *in.HostnameOverride
			}
			if in.Namespace != tt.sb.Namespace || in.Name != tt.sb.Name || in.UID != tt.sb.UID || got != tt.wantHostname ||
				in.HostNetwork != tt.wantHostNet || in.PolicyAnnotation != tt.wantPolicy || in.NamespacePolicy != "" {
				t.Errorf("FromSandbox = %+v (hostname %q), want hostname %q, hostNetwork %v, annotation %q",
					in, got, tt.wantHostname, tt.wantHostNet, tt.wantPolicy)
			}
		})
	}
}

var errAny = errors.New("any error")

func TestSandboxPodAndRef(t *testing.T) {
	labels := map[string]string{"pod-template-hash": "5c6d"}
	tests := []struct {
		name        string
		annotations map[string]string
		static      bool
		wait        time.Duration
	}{
		{"API pod", map[string]string{"kubernetes.io/config.source": "api"}, false, time.Second},
		{"no source", nil, false, time.Second},
		{"static pod from a file", map[string]string{"kubernetes.io/config.source": "file"}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := Sandbox{Namespace: "team", Name: "web-5c6d-x", UID: "u", Labels: labels, Annotations: tt.annotations}
			if got, want := sb.Pod(), (SandboxPod{Namespace: "team", Name: "web-5c6d-x", UID: "u", Static: tt.static}); got != want {
				t.Errorf("Pod = %+v, want %+v", got, want)
			}
			if got := sb.Pod().LookupWait(time.Second); got != tt.wait {
				t.Errorf("LookupWait = %v, want %v", got, tt.wait)
			}
			if ref := sb.Ref(); ref.Namespace != "team" || ref.Name != "web-5c6d-x" || ref.UID != "u" || ref.Labels["pod-template-hash"] != "5c6d" {
				t.Errorf("Ref = %+v", ref)
			}
		})
	}
}
