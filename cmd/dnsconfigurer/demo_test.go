package main

import (
	"strings"
	"testing"
)

// TestDemo runs the README's first command on the embedded examples.
func TestDemo(t *testing.T) {
	code, out, errOut := run(t, "", "demo", "--pod", "../../examples/pod.yaml", "--resolv-conf", "../../examples/node-resolv.conf", "--objects", "../../examples/objects")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"search prod.svc.cluster.local svc.cluster.local cluster.local corp.example.com lab.example.com\nnameserver 10.96.0.10\noptions ndots:2 edns0\n",
		"search search.prod.cluster.local.ap.k8s.io\n",
		"web.prod.svc.cluster.local. 5 IN A 10.96.0.10",
		`dns-version.cluster.local. 28800 IN TXT "1.1.0"`,
		"kubernetes.default.search.prod.cluster.local.ap.k8s.io. 5 IN CNAME kubernetes.default.svc.cluster.local.",
		"nosuch.prod.svc.cluster.local. A (via cluster DNS) -> NXDOMAIN",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}
