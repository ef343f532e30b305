package corefile

import (
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// TestK8sExternal: k8s_external becomes the external field, its zones
// the block's by default, with the differences named.
func TestK8sExternal(t *testing.T) {
	const kube = " kubernetes cluster.local\n forward . 8.8.8.8\n"
	ttl := 60
	for _, tc := range []struct {
		name, corefile string
		want           *v1alpha1.External // as converted, before defaults
		differs        []string           // in the finding's reason
	}{
		{"zone", ".:53 {\n k8s_external example.org\n" + kube + "}\n",
			&v1alpha1.External{Zones: []string{"example.org."}}, nil},
		{"options", ".:53 {\n k8s_external example.org EXAMPLE.net. {\n  apex ns\n  ttl 60\n  fallthrough\n }\n" + kube + "}\n",
			&v1alpha1.External{Zones: []string{"example.org.", "example.net."}, Apex: "ns", TTL: &ttl, Fallthrough: true}, nil},
		{"headless", ".:53 {\n k8s_external example.org {\n  headless\n }\n" + kube + "}\n",
			&v1alpha1.External{Zones: []string{"example.org."}}, []string{"headless"}},
		{"fallthrough zones", ".:53 {\n k8s_external example.org {\n  fallthrough a.example.org\n }\n" + kube + "}\n",
			&v1alpha1.External{Zones: []string{"example.org."}, Fallthrough: true}, []string{"fallthrough a.example.org"}},
		{"block zones", "example.org:53 {\n k8s_external\n" + kube + "}\n",
			&v1alpha1.External{Zones: []string{"example.org."}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			findings := convertField(t, tc.corefile, "external", func(r Result) any { return r.Config.External }, tc.want)
			var reason string
			for _, f := range findings {
				if f.Plugin == "k8s_external" {
					reason = f.Reason
					if f.Status != Differs {
						t.Errorf("finding %+v, want %s", f, Differs)
					}
				}
			}
			for _, d := range append(tc.differs, "NS record") {
				if !strings.Contains(reason, d) {
					t.Errorf("reason %q does not name %q", reason, d)
				}
			}
		})
	}
}

// TestK8sExternalRefused: what CoreDNS's k8s_external setup refuses,
// convert refuses with its reason, naming file and line.
func TestK8sExternalRefused(t *testing.T) {
	for _, tc := range []struct{ name, body, err string }{
		{"no kubernetes", "k8s_external example.org\n forward . 8.8.8.8", "Corefile:2: k8s_external: kubernetes plugin not loaded"},
		{"ttl range", "k8s_external example.org {\n ttl 3601\n}\nkubernetes", "Corefile:3: k8s_external: ttl must be in range [0, 3600]: 3601"},
		{"ttl not a number", "k8s_external example.org {\n ttl x\n}\nkubernetes", `invalid syntax`},
		{"apex without value", "k8s_external example.org {\n apex\n}\nkubernetes", "Wrong argument count or unexpected line ending after 'apex'"},
		{"unknown property", "k8s_external example.org {\n nope\n}\nkubernetes", "unknown property 'nope'"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantRefused(t, tc.body, tc.err) })
	}
}
