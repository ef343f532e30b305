package corefile

import (
	"os"
	"strings"
	"testing"
)

// TestUnrendered: a template copied before its tool filled it in is named
// as such, with the placeholder, its line and how to render it. The
// snippets are the templates' own lines.
func TestUnrendered(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, tool string
	}{
		// k3s manifests/coredns.yaml (0064a396): not even valid YAML.
		{"k3s", cm + "  Corefile: |\n    .:53 {\n        errors\n        health\n        ready\n        kubernetes %{CLUSTER_DOMAIN}% in-addr.arpa ip6.arpa {\n          pods insecure\n" +
			"          fallthrough in-addr.arpa ip6.arpa\n        }\n    }\n---\napiVersion: v1\nkind: Service\nspec:\n  clusterIP: %{CLUSTER_DNS}%\n",
			"in.yaml:12: unrendered template placeholder %{CLUSTER_DOMAIN}%", "k3s fills %{…}%"},
		// NodeLocal DNSCache's Corefile (kubernetes/cluster/addons/dns/nodelocaldns) outside its ConfigMap.
		{"pillar", "__PILLAR__DNS__DOMAIN__:53 {\n    errors\n    cache {\n            success 9984 30\n            denial 9984 5\n    }\n    reload\n    loop\n" +
			"    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__\n    forward . __PILLAR__CLUSTER__DNS__ {\n            force_tcp\n    }\n}\n",
			"in.yaml:1: unrendered template placeholder __PILLAR__DNS__DOMAIN__", "convert that ConfigMap (node-local-dns)"},
		// coredns/helm charts/coredns/templates/configmap.yaml.
		{"helm", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ template \"coredns.fullname\" . }}\n  namespace: {{ .Release.Namespace }}\n" +
			"data:\n  Corefile: |-\n    {{- range .Values.servers }}\n    {{ include \"coredns.serverBlock\" . }}\n    {{- end }}\n",
			"in.yaml:4: unrendered template placeholder {{ template \"coredns.fullname\" . }}", "helm template"},
		// kubespray roles/kubernetes-apps/ansible/templates/coredns-config.yml.j2.
		{"ansible", cm + "  Corefile: |\n{% if dns_etchosts | default(None) %}\n    .:53 {\n        errors\n        health {\n            lameduck {{ coredns_lameduck | default('5s') }}\n        }\n" +
			"        kubernetes {{ dns_domain }} in-addr.arpa ip6.arpa {\n",
			"in.yaml:8: unrendered template placeholder {% if dns_etchosts | default(None) %}", "Ansible/Jinja"},
		{"jinja in a Corefile", ".:53 {\n    errors\n    kubernetes {{ dns_domain }} in-addr.arpa ip6.arpa\n}\n",
			"in.yaml:3: unrendered template placeholder {{ dns_domain }}", "kubespray's templates"},
		// coredns/deployment kubernetes/coredns.yaml.sed, before deploy.sh.
		{"deploy.sh", cm + "  Corefile: |\n    .:53 {\n        errors\n        kubernetes CLUSTER_DOMAIN REVERSE_CIDRS {\n          fallthrough in-addr.arpa ip6.arpa\n        }\n" +
			"        forward . UPSTREAMNAMESERVER {\n          max_concurrent 1000\n        }\n    }STUBDOMAINS\n",
			"in.yaml:10: unrendered template placeholder CLUSTER_DOMAIN", "deploy.sh"},
		// An envsubst template (a Docker entrypoint's Corefile.template).
		{"shell", ".:53 {\n    forward . ${UPSTREAM_DNS}\n    log\n}\n", "in.yaml:2: unrendered template placeholder ${UPSTREAM_DNS}", "envsubst"},
		{"shell bare", ".:53 {\n    kubernetes $CLUSTER_DOMAIN\n}\n", "in.yaml:2: unrendered template placeholder $CLUSTER_DOMAIN", "a shell"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConvertInput(t.Context(), "in.yaml", []byte(tc.in), nil, ConfigMapKeys{})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want+"; render it first: ") || !strings.Contains(err.Error(), tc.tool) {
				t.Fatalf("err %v, want %q … %q", err, tc.want, tc.tool)
			}
		})
	}
	// Not placeholders: the template plugin's answers, CoreDNS's own
	// {$ENV} (refused for itself), a regex's anchor, a comment.
	for _, in := range []string{
		".:53 {\n    template IN A example.org {\n      answer \"{{ .Name }} 60 IN A 127.0.0.1\"\n    }\n}\n",
		".:53 {\n    rewrite name regex (.*)\\.example\\.org$ {1}.svc.cluster.local\n    # set $UPSTREAM and CLUSTER_DOMAIN {{ x }}\n}\n",
	} {
		if err := findPlaceholder("in", []byte(in), 1, false); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
	if _, err := ConvertInput(t.Context(), "in", []byte(".:53 {\n    bind {$POD_IP}\n}\n"), nil, ConfigMapKeys{}); err == nil || !strings.Contains(err.Error(), "environment variables") {
		t.Errorf("{$POD_IP}: %v", err)
	}
	// k3s's unrendered manifest of the corpus: named, and recognized as
	// the coredns ConfigMap it renders to.
	const k3s = "../../test/convert/corpus/52-k3s-unrendered-manifest/manifest.yaml"
	if text, err := os.ReadFile(k3s); err == nil {
		_, err := ConvertInput(t.Context(), "manifest.yaml", text, nil, ConfigMapKeys{})
		if err == nil || !strings.HasPrefix(err.Error(), "manifest.yaml:60: unrendered template placeholder %{CLUSTER_DOMAIN}%") {
			t.Errorf("%s: %v", k3s, err)
		}
		if f := Recognize(t.Context(), "manifest.yaml", text); f != FormCoreDNS {
			t.Errorf("%s: Recognize %q", k3s, f)
		}
	}
}
