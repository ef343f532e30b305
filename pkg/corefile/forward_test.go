package corefile

import "testing"

// TestForwardTLS: tls:// targets, tls and tls_servername map onto the
// route's upstreams and tls (issue 69).
func TestForwardTLS(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string   // inside ".:53 { }"
		config []string // YAML substrings
		report []string // report substrings
		absent []string // YAML substrings it must not have
	}{
		{name: "server name", body: "forward . tls://1.1.1.1 tls://2.2.2.2:5353 {\n tls_servername dns.foo.com\n}",
			config: []string{"- tls://1.1.1.1\n", "- tls://2.2.2.2:5353\n", "tls:\n    serverName: dns.foo.com"},
			report: []string{"converted  forward route .: upstreams tls://1.1.1.1 tls://2.2.2.2:5353, tls serverName dns.foo.com"}},
		{name: "system roots", body: "forward . tls://9.9.9.9 {\n tls\n}", config: []string{"- tls://9.9.9.9\n"}, absent: []string{"tls:\n"}},
		{name: "CA", body: "forward . tls://9.9.9.9 {\n tls /etc/ca.pem\n tls_servername dns.quad9.net.\n}",
			config: []string{"caFile: /etc/ca.pem", "serverName: dns.quad9.net\n"}},
		{name: "client certificate", body: "forward . tls://9.9.9.9 {\n tls /c.pem /k.pem\n}",
			config: []string{"certFile: /c.pem", "keyFile: /k.pem"}, absent: []string{"caFile"}},
		{name: "client certificate and CA", body: "forward . tls://9.9.9.9 {\n tls /c.pem /k.pem /ca.pem\n}",
			config: []string{"certFile: /c.pem", "keyFile: /k.pem", "caFile: /ca.pem"}},
		{name: "per-upstream server name", body: "forward . tls://9.9.9.9%dns.quad9.net tls://[2620:fe::fe%dns.quad9.net]:853",
			config: []string{"- tls://9.9.9.9\n", "- tls://[2620:fe::fe]:853\n", "serverName: dns.quad9.net"}},
		{name: "per-upstream server names differ", body: "forward . tls://9.9.9.9%dns.quad9.net tls://1.1.1.1%cloudflare-dns.com:853",
			config: []string{"- tls://9.9.9.9\n", "serverName: dns.quad9.net"}, absent: []string{"1.1.1.1"},
			report: []string{"tls://1.1.1.1%cloudflare-dns.com:853: server name cloudflare-dns.com, where tls://9.9.9.9%dns.quad9.net has dns.quad9.net"}},
		{name: "per-upstream server name on some", body: "forward . tls://9.9.9.9%dns.quad9.net tls://149.112.112.112",
			config: []string{"- tls://149.112.112.112\n", "serverName: dns.quad9.net"},
			report: []string{"differs", "tls:// upstreams without %NAME are verified as dns.quad9.net too, where CoreDNS verifies their IP address"}},
		{name: "tls and plain upstreams", body: "forward . tls://1.1.1.1 8.8.8.8 {\n tls_servername cloudflare-dns.com\n}",
			config: []string{"- tls://1.1.1.1\n", "- 8.8.8.8\n", "serverName: cloudflare-dns.com"}},
		{name: "tls options without tls upstreams", body: "forward . 8.8.8.8 {\n tls\n tls_servername dns.google\n}",
			absent: []string{"tls:", "serverName"}, report: []string{"no tls:// upstream to use them; CoreDNS ignores them too"}},
		{name: "bad server name", body: "forward . tls://1.1.1.1 {\n tls_servername dns_google\n}",
			absent: []string{"serverName"}, report: []string{"Corefile:3  forward  dropped    tls_servername dns_google: not a host name"}},
		{name: "DoH dropped", body: "forward . https://1.1.1.1 tls://1.1.1.1",
			config: []string{"- tls://1.1.1.1\n"}, absent: []string{"https"},
			report: []string{"https://1.1.1.1: no DNS over HTTPS, QUIC or gRPC to upstreams; workaround: the same resolver's DNS over TLS"}},
		{name: "DoH only", body: "forward . https://1.1.1.1", absent: []string{"forward:"},
			report: []string{"forward .: no upstream left"}},
		{name: "tls upstream by name", body: "forward . tls://dns.example", absent: []string{"forward:"},
			report: []string{"tls://dns.example: a host name, which CoreDNS resolves at start; workaround: its IP address, with tls_servername dns.example"}},
		{name: "resolv.conf and an address", body: "forward . /etc/resolv.conf 8.8.8.8",
			config: []string{"- /etc/resolv.conf\n  - 8.8.8.8\n"}, report: []string{"converted  forward route .: upstreams /etc/resolv.conf 8.8.8.8"}},
		{name: "two resolv.conf files", body: "forward . /etc/resolv.conf /run/resolv.conf 8.8.8.8",
			config: []string{"- /etc/resolv.conf\n  - 8.8.8.8\n"},
			report: []string{"Corefile:2  forward  dropped    forward route .: upstreams /etc/resolv.conf 8.8.8.8; /run/resolv.conf: a second resolv.conf (/etc/resolv.conf is the route's)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantConvertedText(t, ".:53 {\n"+tc.body+"\n}\n", tc.config, tc.report, tc.absent)
		})
	}
}

// TestForwardTLSRefused: what CoreDNS refuses is refused with its line.
func TestForwardTLSRefused(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"tls with four arguments", "forward . tls://1.1.1.1 {\n tls /a /b /c /d\n}", "Corefile:3: forward: tls takes at most three arguments"},
		{"two kinds of server name", "forward . tls://1.1.1.1%a.example {\n tls_servername b.example\n}", "Corefile:2: forward: both forward"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantRefused(t, tc.body, tc.want) })
	}
}
