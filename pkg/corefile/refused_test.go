package corefile

import "testing"

// TestRefused: what CoreDNS 1.15's setup refuses, convert refuses, naming
// the file and line and giving CoreDNS's reason (its setup code's
// message). test/convert's TestCorpus runs CoreDNS itself on real ones.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name, body, err string
	}{
		// kubespray's documented "rewrite name stop ..." (a mode after the type).
		{"rewrite mode after name", "rewrite name stop website.tld website.ns.svc.cluster.local",
			"Corefile:2: rewrite: name rule supports only exact, prefix, suffix, substring, and regex name matching, received: stop"},
		{"rewrite answer first", "rewrite answer name a.example b.example", "response rewrites must begin with a name rule"},
		{"rewrite answer without a match type", "rewrite name a.example b.example answer auto", "received: a.example"},
		{"rewrite too few", "rewrite name a.example", "too few arguments for a name rule"},
		{"rewrite bad type", "rewrite nom a b", `invalid rule type "nom"`},
		{"rewrite mode only", "rewrite {\n continue\n}", "continue rule must begin with a rule type"},
		{"rewrite regex groups", `rewrite name regex (.*)\.a\.example {2}.b.example`, "uses more subexpressions"},
		{"rewrite bad regex", `rewrite name regex (.*\.a\.example x.example`, "invalid regex matching pattern"},
		{"rewrite answer type", "rewrite name exact a.example b.example answer nope x y", `invalid type "nope" for answer rule`},
		{"rewrite auto and name", "rewrite name suffix .a.example .b.example answer auto answer name (.*) {1}", "auto name answer rule cannot be combined"},
		{"rewrite class arity", "rewrite class CH", "class rules must have exactly two arguments"},
		{"cache zero", "cache 0", "Corefile:2: cache: cache TTL can not be zero or negative: 0"},
		{"cache success ttl", "cache {\n success 100 0\n}", "Corefile:3: cache: cache TTL can not be zero or negative: 0"},
		{"cache prefetch percentage", "cache 30 {\n prefetch 1 10m 95%\n}", "percentage should fall in range [10, 90]: 95"},
		{"cache unknown option", "cache {\n size 10\n}", "Wrong argument count or unexpected line ending after 'size'"},
		{"cache servfail", "cache {\n servfail 10m\n}", "caching SERVFAIL responses over 5 minutes is not permitted"},
		{"cache twice", "cache 30\ncache 60", "Corefile:3: cache: this plugin can only be used once per Server Block"},
		{"hosts twice", "hosts /a\nhosts /b", "this plugin can only be used once per Server Block"},
		{"kubernetes upstream", "kubernetes cluster.local {\n upstream\n}", "Corefile:3: kubernetes: unknown property 'upstream'"},
		{"forward to a name", "forward . dns.google", `Corefile:2: forward: not an IP address or file "dns.google"`},
		{"forward typographic quotes", "forward . \u201c8.8.8.8\u201d", "not an IP address or file \"\u201c8.8.8.8\u201d\""},
		{"kubernetes ttl", "kubernetes cluster.local {\n ttl 7200\n}", "ttl must be in range [0, 3600]: 7200"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantRefused(t, tc.body, tc.err) })
	}
}
