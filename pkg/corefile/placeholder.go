package corefile

import (
	"fmt"
	"regexp"
	"strings"
)

// A template placeholder left in an input: the file was copied from a
// repository or a chart before its tool filled it in. Each kind says how
// to render it; convert reads rendered configurations only.
var placeholderKinds = []struct {
	re     *regexp.Regexp
	pillar bool // node-cache fills these in NodeLocal DNSCache's ConfigMap
	advice string
}{
	{re: regexp.MustCompile(`%\{[A-Za-z0-9_]+\}%`),
		advice: "k3s fills %{…}% when it deploys its manifests: convert the rendered /var/lib/rancher/k3s/server/manifests/coredns.yaml, or the ConfigMap the cluster runs"},
	{re: regexp.MustCompile(`__PILLAR__[A-Z0-9_]*__`), pillar: true,
		advice: "node-cache fills __PILLAR__ placeholders in NodeLocal DNSCache's ConfigMap only: convert that ConfigMap (node-local-dns), or fill them with sed as its addon's README says"},
	{re: regexp.MustCompile(`\{\{-?\s*\.(Values|Release|Chart|Capabilities|Files)\b[^}]*\}\}|\{\{-?\s*(include|toYaml|tpl|template|if|range|with|end)\b[^}]*\}\}`),
		advice: "Helm fills {{ }}: convert the output of helm template, or the ConfigMap the cluster runs"},
	{re: regexp.MustCompile(`\{%-?\s[^%]*%\}|\{\{-?\s*[A-Za-z_][A-Za-z0-9_.|' ]*\}\}`),
		advice: "Ansible/Jinja fills {{ }} and {% %} (kubespray's templates): convert the file it writes on the node, or the ConfigMap the cluster runs"},
	{re: regexp.MustCompile(`\{\{[^}]*\}\}`),
		advice: "a template tool fills {{ }}: convert its output, or the ConfigMap the cluster runs"},
	{re: regexp.MustCompile(`(?:^|[^{\\$])(\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$[A-Z_][A-Z0-9_]*)`),
		advice: "a shell fills $VAR (envsubst, a deploy script): convert its output, or the ConfigMap the cluster runs"},
	{re: regexp.MustCompile(`\b(CLUSTER_DOMAIN|REVERSE_CIDRS|UPSTREAMNAMESERVER|STUBDOMAINS|CLUSTER_DNS_IP)\b`),
		advice: "coredns/deployment's deploy.sh fills these with sed: convert its output, or the ConfigMap the cluster runs"},
}

// placeholderError is an unrendered template placeholder at a line.
type placeholderError struct {
	name       string
	line       int
	text, tool string
}

func (e *placeholderError) Error() string {
	return fmt.Sprintf("%s:%d: unrendered template placeholder %s; render it first: %s", e.name, e.line, e.text, e.tool)
}

// findPlaceholder finds the first unrendered placeholder in text, whose
// line 1 is line first of the input named name. pillars: node-cache
// fills __PILLAR__ ones here. A {{ }} inside a quoted string is the
// template plugin's own (answer "{{ .Name }} 60 IN A ..."), and a
// comment is no configuration.
func findPlaceholder(name string, text []byte, first int, pillars bool) error {
	if !mayHold(string(text)) {
		return nil
	}
	for i, l := range strings.Split(string(text), "\n") {
		if j := strings.IndexByte(l, '#'); j >= 0 {
			l = l[:j]
		}
		for _, k := range placeholderKinds {
			if k.pillar && pillars {
				continue
			}
			for _, m := range k.re.FindAllStringSubmatchIndex(l, -1) {
				start, end := m[0], m[1]
				if len(m) > 2 && m[2] >= 0 && k.re.NumSubexp() == 1 {
					start, end = m[2], m[3]
				}
				if strings.Count(l[:start], `"`)%2 == 1 && !strings.Contains(l[start:end], ".Values") {
					continue // the template plugin's, or a quoted string
				}
				return &placeholderError{name: name, line: first + i, text: l[start:end], tool: k.advice}
			}
		}
	}
	return nil
}

// marks are what each placeholder kind holds: text with none of them
// is not read line by line (a 10 MiB ConfigMap of 400,000 keys).
var marks = []string{"%{", "__PILLAR__", "{{", "{%", "$", "CLUSTER_D", "REVERSE_CIDRS", "UPSTREAMNAMESERVER", "STUBDOMAINS"}

func mayHold(text string) bool {
	for _, m := range marks {
		if strings.Contains(text, m) {
			return true
		}
	}
	return false
}

// unplaceheld is text with its placeholders replaced by a word, to tell
// what form the rendered input would have (Recognize).
func unplaceheld(text []byte) []byte {
	for _, k := range placeholderKinds {
		text = k.re.ReplaceAll(text, []byte("x"))
	}
	return text
}
