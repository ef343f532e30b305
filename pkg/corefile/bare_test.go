package corefile

import (
	"strings"
	"testing"
)

// coreDNSBare is what CoreDNS 1.15.0's binary prints for ". { PLUGIN }",
// each plugin of its plugin.cfg alone (recorded 2026-11-29 with
// test/testbin's coredns; test/convert's TestBarePlugins runs it again):
// the plugins it refuses and its words. Those not listed start, but
// kubernetes, route53 and clouddns, refused for want of credentials.
var coreDNSBare = map[string]string{
	"autopath":  "plugin/autopath: no resolv-conf specified",
	"bind":      "plugin/bind: at least one address or interface name is expected",
	"dnstap":    "plugin/dnstap: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'dnstap'",
	"dynupdate": "plugin/dynupdate: Corefile:2 - Error during parsing: file is required",
	"file":      "plugin/file: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'file'",
	"forward":   "plugin/forward: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'forward'",
	"geoip":     "plugin/geoip: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'geoip'",
	// Refused at startup, for want of a kubernetes plugin in the block
	// (k8sexternal.go).
	"k8s_external": "plugin/k8s_external: kubernetes plugin not loaded",
	"grpc":         "plugin/grpc: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'grpc'",
	"header":       "plugin/header: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'header'",
	"on":           "Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'on'",
	"rewrite":      "plugin/rewrite: no rule type specified for rewrite",
	"root":         "plugin/root: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'root'",
	"secondary":    "plugin/secondary: Corefile:2 - Error during parsing: secondary zones require a transfer from property",
	"sign":         "plugin/sign: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'sign'",
	"template":     "plugin/template: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'template'",
	"timeouts":     "plugin/timeouts: plugin/timeouts: Corefile:2 - Error during parsing: timeouts block with no timeouts specified",
	"tls":          "plugin/tls: ACME requires at least one domain",
	"transfer":     "plugin/transfer: plugin/transfer: Corefile:2 - Error during parsing: 'to' is required",
	"view":         "plugin/view: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'view'",
}

// coreDNSReason is CoreDNS's reason without its plugin and place.
func coreDNSReason(msg string) string {
	if i := strings.LastIndex(msg, "Error during parsing: "); i >= 0 {
		return msg[i+len("Error during parsing: "):]
	}
	return msg[strings.LastIndex(msg, ": ")+2:]
}

// TestBareRefused: every plugin of CoreDNS 1.15's plugin.cfg alone in a
// block; convert refuses exactly those CoreDNS refuses, naming the line,
// the plugin and CoreDNS's reason.
func TestBareRefused(t *testing.T) {
	for _, p := range plugins {
		t.Run(p, func(t *testing.T) {
			_, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(".:53 {\n    " + p + "\n}\n")}, nil)
			msg, refused := coreDNSBare[p]
			switch {
			case refused && err == nil:
				t.Fatalf("accepted; CoreDNS refuses it: %s", msg)
			case refused:
				want := "Corefile:2: " + p + ": " + coreDNSReason(msg) + " (CoreDNS refuses it too)"
				if err.Error() != want {
					t.Fatalf("err %q, want %q", err, want)
				}
			case err != nil:
				t.Fatalf("refused (%v); CoreDNS takes it", err)
			}
		})
	}
	if len(plugins) != 62 {
		t.Errorf("%d plugins, CoreDNS 1.15's plugin.cfg has 62", len(plugins))
	}
}
