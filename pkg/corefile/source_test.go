package corefile

import (
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

const (
	cmCoreDNS = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coredns\n  namespace: kube-system\ndata:\n  Corefile: |\n    .:53 {\n        forward . /etc/resolv.conf\n    }\n"
	cmCustom  = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coredns-custom\n  namespace: kube-system\ndata:\n  a.server: |\n    a.example {\n        forward . 10.0.0.53\n    }\n"
	cmNode    = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: node-local-dns\n  namespace: kube-system\ndata:\n  Corefile: |\n    cluster.local:53 {\n        forward . __PILLAR__CLUSTER__DNS__\n    }\n"
	sa        = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: coredns\n"
)

// TestReadSource: every form an operator has the configuration in.
func TestReadSource(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		form       Form
		taken, err string
		keys       []string
	}{
		{name: "empty", text: " \n\t\n", err: "empty input"},
		{name: "binary", text: "\x00\x01Corefile", err: "binary input"},
		{name: "latin-1", text: ".:53 {\n\xe9\n}", err: "binary input"},
		{name: "Corefile", text: ".:53 {\n  forward . 10.0.0.1\n}\n", form: FormCorefile},
		{name: "Corefile with a colon line", text: "# a: comment\nexample.com:53 {\n  log . \"{remote}: {name}\"\n}\n", form: FormCorefile},
		{name: "ConfigMap", text: cmCoreDNS, form: FormCoreDNS, keys: []string{"Corefile"}},
		{name: "kubectl -o json", text: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"coredns"},"data":{"Corefile":".:53 {\n}\n"}}`, form: FormCoreDNS},
		{name: "manifest", text: sa + "---\n" + cmCoreDNS + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: coredns\n", form: FormCoreDNS,
			taken: "took ConfigMap kube-system/coredns (document 2 of the input)"},
		{name: "List with coredns-custom", text: "apiVersion: v1\nkind: List\nitems:\n- " + indent(cmCoreDNS) + "- " + indent(cmCustom), form: FormCoreDNS,
			keys: []string{"Corefile", "a.server"}, taken: "with the keys of ConfigMap kube-system/coredns-custom as the files its imports read"},
		{name: "kubectl edit fragment", text: "data:\n  Corefile: |\n    .:53 {\n        errors\n    }\n", form: FormCoreDNS},
		{name: "kube-dns", text: "kind: ConfigMap\nmetadata:\n  name: kube-dns\ndata:\n  stubDomains: |\n    {\"acme.local\": [\"1.2.3.4\"]}\n", form: FormKubeDNS},
		{name: "coredns-custom alone", text: cmCustom, err: "ConfigMap kube-system/coredns-custom is a coredns-custom ConfigMap (keys a.server): it only adds"},
		{name: "NodeLocal DNSCache", text: cmNode, form: FormNodeLocal},
		{name: "NodeLocal DNSCache and CoreDNS", text: cmNode + "---\n" + cmCoreDNS, form: FormCoreDNS, taken: "document 2"},
		{name: "two, none named coredns", text: strings.Replace(cmCoreDNS, "name: coredns", "name: a", 1) + "---\n" + strings.Replace(cmCoreDNS, "name: coredns", "name: b", 1),
			err: "2 DNS ConfigMaps and none named coredns"},
		{name: "no DNS ConfigMap", text: sa + "---\n" + sa, err: "no ConfigMap with data.Corefile"},
		{name: "data not strings", text: "kind: ConfigMap\ndata:\n  Corefile:\n    a: b\n", err: "document 1: not a Kubernetes object"},
		{name: "broken second document", text: cmCoreDNS + "---\nkind: [\n", err: "document 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ReadSource(t.Context(), "in.yaml", []byte(tc.text))
			if !testkit.WantErr(t, err, tc.err) {
				return
			}
			if s.Form != tc.form {
				t.Errorf("form %q, want %q", s.Form, tc.form)
			}
			if !strings.Contains(s.Taken, tc.taken) || (tc.taken == "" && s.Taken != "") {
				t.Errorf("taken %q, want %q", s.Taken, tc.taken)
			}
			for _, k := range tc.keys {
				if _, ok := s.Data[k]; !ok {
					t.Errorf("no key %s in %v", k, keys(s.Data))
				}
			}
		})
	}
}

// indent makes a YAML document a list item's body.
func indent(doc string) string {
	return strings.ReplaceAll(strings.TrimSuffix(doc, "\n"), "\n", "\n  ") + "\n"
}
