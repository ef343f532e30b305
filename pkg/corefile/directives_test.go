package corefile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// convertText converts a Corefile and returns its YAML and report.
func convertText(t *testing.T, text string) (string, string) {
	t.Helper()
	r, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(text)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return render(t, r)
}

// wantConvertedText converts a Corefile and checks that its YAML has
// each of config and none of absent, and its report each of report.
func wantConvertedText(t *testing.T, text string, config, report, absent []string) {
	t.Helper()
	cfg, rep := convertText(t, text)
	testkit.WantSubstrings(t, "config", cfg, config...)
	testkit.WantSubstrings(t, "report", rep, report...)
	for _, a := range absent {
		if strings.Contains(cfg, a) {
			t.Errorf("config has %q:\n%s", a, cfg)
		}
	}
}

// wantRefused: convert refuses the Corefile ".:53 { body }" with an error
// containing want.
func wantRefused(t *testing.T, body, want string) {
	t.Helper()
	_, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(".:53 {\n" + body + "\n}\n")}, nil)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err %v, want an error with %q", err, want)
	}
}

// convertField converts a Corefile, checks that the field field picks
// from its configuration marshals as want does (named what in failures)
// and that the configuration, with defaults, validates; it returns the
// findings for the caller's checks.
func convertField(t *testing.T, corefile, what string, field func(Result) any, want any) []Finding {
	t.Helper()
	r, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(corefile)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(field(r))
	w, _ := json.Marshal(want)
	if string(got) != string(w) {
		t.Fatalf("%s\n %s\nwant\n %s", what, got, w)
	}
	cfg := r.Config
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Errorf("the converted configuration does not validate: %v", err)
	}
	return r.Findings
}

// render is a result's configuration as YAML and its report.
func render(t *testing.T, r Result) (string, string) {
	t.Helper()
	y, err := yaml.Marshal(r.Config)
	if err != nil {
		t.Fatal(err)
	}
	var rep strings.Builder
	if err := WriteReport(&rep, r.Findings); err != nil {
		t.Fatal(err)
	}
	return string(y), rep.String()
}

// TestDirectives: each plugin and option maps onto its field, or gets the
// finding that says why not.
func TestDirectives(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string   // inside ".:53 { }"
		extra  string   // after it
		config []string // YAML substrings
		report []string // report substrings
		absent []string // YAML substrings it must not have
	}{
		{name: "forward options", body: "forward . dns://10.0.0.1 10.0.0.2:5353 {\n except corp.example\n force_tcp\n expire 20s\n max_fails 3\n health_check 1s\n policy sequential\n max_concurrent 500\n}",
			config: []string{"- 10.0.0.1\n", "- 10.0.0.2:5353", "except:\n  - corp.example", "forceTCP: true", "expire: 20s", "maxFails: 3", "healthCheck: 1s", "policy: sequential", "maxConcurrent: 500"},
			report: []string{"converted  forward route .: upstreams 10.0.0.1 10.0.0.2:5353"}},
		{name: "forward tls", body: "forward . tls://9.9.9.9 {\n tls_servername dns.quad9.net\n}",
			config: []string{"- tls://9.9.9.9\n", "serverName: dns.quad9.net"}, report: []string{"Corefile:2  forward  converted  forward route .: upstreams tls://9.9.9.9, tls serverName dns.quad9.net"}},
		{name: "forward next", body: "forward . 10.0.0.1 {\n next NXDOMAIN\n}", report: []string{"Corefile:3  forward  dropped    next NXDOMAIN"}},
		{name: "prefer udp", body: "forward . 10.0.0.1 {\n prefer_udp\n}", config: []string{"preferUDP: true"}},
		{name: "failfast", body: "forward . 10.0.0.1 {\n failfast_all_unhealthy_upstreams\n}", config: []string{"failFastAllUnhealthy: true"},
			report: []string{"failFastAllUnhealthy"}},
		{name: "cache options", body: "cache 60 {\n success 10000 600 10\n denial 2000 30\n prefetch 5 2m 20%\n serve_stale 2h\n}",
			config: []string{"successBytes: 4992Ki", "denialBytes: 896Ki", "maxTTL: 600s", "minTTL: 10s", "maxNegativeTTL: 30s", "amount: 5", "window: 2m", "percentage: 20", "serveStale: 2h"},
			report: []string{"success 10000 entries (CoreDNS holds 9984): bounded as 4992Ki bytes", "prefetch 5 2m 20%"}},
		{name: "cache disable elsewhere", body: "cache 30 {\n disable success example.org\n}", report: []string{"differs    disable success example.org"}},
		{name: "no cache", body: "forward . 10.0.0.1", config: []string{"noClusterZone: true"},
			report: []string{"Corefile:1  server   differs    no kubernetes plugin: noClusterZone (no API server read; the names of cluster.local. and the reverse names answered as any other", "; no cache plugin"}},
		{name: "cache default", body: "cache", config: []string{"maxTTL: 3600s", "maxNegativeTTL: 1800s"}},
		{name: "kubernetes options", body: "kubernetes my.domain in-addr.arpa {\n pods verified\n ttl 10\n namespaces a b\n endpoint_pod_names\n noendpoints\n ignore empty_service\n kubeconfig /k.yaml ctx\n}",
			config: []string{"clusterDomain: my.domain", "pods: verified", "ttl: 10", "namespaces:\n- a\n- b", "endpointPodNames: true", "noEndpoints: true", "ignoreEmptyService: true", "kubeconfig: /k.yaml"},
			report: []string{"kubeconfig context ctx", "CoreDNS answers them NXDOMAIN without fallthrough"}},
		{name: "kubernetes extra zone", body: "kubernetes cluster.local other.zone", report: []string{"kubernetes  dropped", "zones other.zone: one cluster domain"}},
		{name: "kubernetes fallthrough all", body: "kubernetes cluster.local {\n fallthrough\n}", report: []string{"fallthrough: names of the cluster domain that do not exist are NXDOMAIN"}},
		{name: "kubernetes fallthrough twice", body: "kubernetes cluster.local in-addr.arpa {\n fallthrough in-addr.arpa\n fallthrough example.local\n}",
			report: []string{"fallthrough in-addr.arpa: replaced by the fallthrough at Corefile:4", "reverse names of no Service or pod are forwarded; CoreDNS answers them NXDOMAIN"}},
		{name: "kubernetes endpoint", body: "kubernetes cluster.local {\n endpoint https://10.0.0.1\n}", report: []string{"dropped    endpoint: the API server comes from a kubeconfig"}},
		{name: "hosts inline", body: "hosts /etc/extra {\n 10.0.0.1 a.example b.example\n 10.0.0.2 a.example\n ttl 60\n reload 1m\n no_reverse\n fallthrough\n}",
			config: []string{"file: /etc/extra", "ttl: 60s", "reload: 1m", "name: a.example", "- 10.0.0.1\n  - 10.0.0.2", "name: b.example"},
			report: []string{"no_reverse: PTR records"}},
		{name: "hosts in the cluster domain", body: "hosts {\n 10.0.0.1 x.svc.cluster.local\n fallthrough\n}", report: []string{"dropped    x.svc.cluster.local: inside the cluster domain"}},
		{name: "hosts without fallthrough", body: "hosts /etc/extra", report: []string{"CoreDNS answers them NXDOMAIN"}},
		{name: "one hosts file in two blocks", body: "hosts /a {\n fallthrough\n}", extra: "x.example {\n hosts /a {\n  fallthrough\n }\n}", report: []string{"hosts   converted  hosts.file /a, the same file as at Corefile:2"}},
		{name: "two hosts files", body: "hosts /a {\n fallthrough\n}", extra: "x.example {\n hosts /b {\n  fallthrough\n }\n}", report: []string{"a second hosts file /b (the first is at Corefile:2)"}},
		{name: "rewrite exact", body: "rewrite name a.example b.example", config: []string{"match: exact", "from: a.example", "to: b.example"}},
		{name: "rewrite continue suffix", body: "rewrite continue name suffix .old .new", config: []string{"match: suffix", "continue: true"}},
		{name: "rewrite regex answer", body: "rewrite name regex (.*)\\.a {1}.b answer name (.*)\\.b {1}.a", config: []string{"answerFrom: (.*)\\.b", "answerTo: '{1}.a'"}, report: []string{"converted  rewrite regex"}},
		{name: "rewrite regex without answer", body: "rewrite name regex (.*)\\.a {1}.b", report: []string{"differs", "needs answer name"}},
		{name: "rewrite type", body: "rewrite type ANY HINFO", report: []string{"dropped    rewrite type: only name rules"}},
		{name: "log class", body: "log . {\n class denial\n}", config: []string{"logQueries: true"}, report: []string{"differs    logQueries logs"}},
		{name: "log class error", body: "log . {\n class error\n}", report: []string{"converted  class error: errors are always logged; logQueries stays off"}, absent: []string{"logQueries"}},
		{name: "log in a zone's block", extra: "corp.example {\n log\n forward . 10.0.0.53\n}", config: []string{"logQueries: true"},
			report: []string{"differs    in the corp.example. block: logQueries logs every query, not only the zone's"}},
		{name: "a stub domain's cache", body: "cache 30\nforward . 10.0.0.1", extra: "corp.example {\n cache 3600 {\n  prefetch 10 1m 10%\n  serve_stale 1h\n }\n forward . 10.0.0.53\n}",
			config: []string{"maxTTL: 30s\n", "zone: corp.example", "cache:\n    maxNegativeTTL: 3600s\n    maxTTL: 3600s", "prefetch:\n      amount: 10", "serveStale: 1h"},
			report: []string{"converted  the cache of the route of corp.example.: maxTTL and maxNegativeTTL 3600s, prefetch 10 1m 10%, serveStale 1h"}},
		{name: "a stub domain without cache", body: "cache 30\nforward . 10.0.0.1", extra: "corp.example {\n forward . 10.0.0.53\n}",
			config: []string{"cache:\n    disabled: true"}, report: []string{"route corp.example: not cached (cache.disabled), as CoreDNS caches nothing of a block without cache"}},
		{name: "a route of the main block", body: "cache 30\nforward . 10.0.0.1\nforward corp.example 10.0.0.53", absent: []string{"disabled: true", "  cache:"}},
		{name: "a forward of another zone's block", extra: "example.org {\n forward foo.com 10.0.0.53\n}", absent: []string{"zone: foo.com"},
			report: []string{"dropped    forward foo.com in the example.org. block takes no name"}},
		{name: "a narrower forward in a zone's block", extra: "example.org {\n forward a.example.org 10.0.0.53\n}", config: []string{"zone: a.example.org"}},
		{name: "no forward", body: "kubernetes cluster.local", report: []string{"no forward: names outside the cluster domain are answered REFUSED"}},
		{name: "bind", body: "bind 127.0.0.1 ::1", config: []string{"listen:\n- 127.0.0.1:53\n- '[::1]:53'"}},
		{name: "bind interface", body: "bind eth0", report: []string{"dropped    eth0: not an IP address"}},
		{name: "autopath", body: "autopath @kubernetes\nkubernetes cluster.local {\n pods insecure\n}", config: []string{"autopathBySource: true", "pods: verified"}},
		{name: "loadbalance weighted", body: "loadbalance weighted /w", report: []string{"dropped    loadbalance weighted"}},
		{name: "unsupported plugin", body: "dnssec", report: []string{"dnssec  dropped"}},
		{name: "health address", body: "health :8091 {\n lameduck 3s\n}", config: []string{"lameduck: 3s"}, report: []string{"not :8091/health"}},
		{name: "prometheus localhost", body: "prometheus", config: []string{"metricsListen: 127.0.0.1:9153"}},
		{name: "port", body: "errors", config: []string{"- :53"}},
		{name: "stub domain", extra: "corp.example:53 {\n forward . 10.0.0.53\n}", config: []string{"zone: corp.example"}, report: []string{"Corefile:4  server", "Corefile:1  server"}},
		{name: "route for the cluster domain", extra: "cluster.local:53 {\n forward . 10.0.0.53\n}", report: []string{"Corefile:5  forward  converted", "forward route cluster.local: upstreams 10.0.0.53"}},
		{name: "route for the cluster domain, with kubernetes", body: "kubernetes cluster.local", extra: "cluster.local:53 {\n forward . 10.0.0.53\n}",
			report: []string{"dropped    forward route cluster.local", "a route for the cluster domain cluster.local itself"}},
		{name: "stub domain other port", extra: "corp.example:5300 {\n forward . 10.0.0.53\n}", report: []string{"not port 5300"}},
		{name: "tls server", extra: "tls://.:853 {\n forward . 10.0.0.53\n}", report: []string{"tls:// servers are not supported"}},
		{name: "snippet", extra: "(common) {\n errors\n}\nx.example {\n import common\n forward . 10.0.0.9\n}", config: []string{"zone: x.example"}, report: []string{"errors"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantConvertedText(t, ".:53 {\n"+tc.body+"\n}\n"+tc.extra, tc.config, tc.report, tc.absent)
		})
	}
}

// TestEnv: {$VAR} is expanded as CoreDNS does, in directives and imports.
// TestEnv (issue 55 row 4): {$VAR} is refused with the variable and its
// line, in the Corefile and in an imported file; the value in convert's
// own environment never reaches the output.
func TestEnv(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.server"), []byte("a.example {\n forward . {$UPSTREAM}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("UPSTREAM", "10.9.9.9")
	for _, tc := range []struct {
		name, text, err string
	}{
		{"in the Corefile", ".:53 {\n forward . {$UPSTREAM}\n}\n", "Corefile:2: {$UPSTREAM}: convert does not read environment variables"},
		{"windows form", ".:53 {\n forward . {%UPSTREAM%}\n}\n", "Corefile:2: {%UPSTREAM%}: convert does not read environment variables"},
		{"in an import", ".:53 {\n forward . 10.0.0.1\n}\nimport *.server\n", "a.server:2: {$UPSTREAM}: convert does not read environment variables"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(t.Context(), Input{Name: filepath.Join(dir, "Corefile"), Text: []byte(tc.text), Imports: os.DirFS(dir)}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v (config %+v), want an error containing %q", err, r.Config, tc.err)
			}
			if strings.Contains(err.Error(), "10.9.9.9") {
				t.Errorf("the environment's value is in the error: %v", err)
			}
		})
	}
}

// TestImportsStayInTheirDirectory (issue 55 rows 4 and 5): an import reads
// only files of its directory (the ConfigMap's keys, or the Corefile's
// directory), an import of a file inside an imported file is refused (a
// key that imports itself never ends in caddy), and so is an import that
// is not on a line of its own.
func TestImportsStayInTheirDirectory(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("topsecret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, text := range map[string]string{
		"self.server": "b.example {\n forward . 10.0.0.2\n}\nimport /etc/coredns/custom/*.server\n",
		"ok.server":   "c.example {\n forward . 10.0.0.3\n}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, text, importDir, err, finding string
	}{
		{name: "absolute path outside", text: ".:53 {\n forward . 10.0.0.1\n}\nimport " + outside + "/secret\n",
			finding: "outside " + dir + ", not read"},
		{name: "relative path outside", text: ".:53 {\n forward . 10.0.0.1\n}\nimport ../" + filepath.Base(outside) + "/secret\n",
			finding: ", not read"},
		{name: "a file by its bare name", text: ".:53 {\n forward . 10.0.0.1\n}\nimport ok.server\n", finding: "c.example: its names are served"},
		{name: "inside a block on one line", text: ".:53 { import " + outside + "/secret }\n",
			err: "Corefile:1: import: convert reads an import only on a line of its own"},
		{name: "a key importing itself", text: ".:53 {\n forward . 10.0.0.1\n}\nimport /etc/coredns/custom/*.server\n", importDir: dir,
			err: "self.server:4: import in an imported file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(t.Context(), Input{Name: filepath.Join(dir, "Corefile"), Text: []byte(tc.text), Imports: dirFS(tc.importDir)}, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error containing %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			var all strings.Builder
			if err != nil {
				all.WriteString(err.Error())
			}
			for _, f := range r.Findings {
				fmt.Fprintf(&all, "%s %s %s %s\n", f.Where, f.Plugin, f.Status, f.Reason)
			}
			if strings.Contains(all.String(), "topsecret") {
				t.Errorf("the outside file's content reached the output:\n%s", all.String())
			}
			if tc.finding != "" && !strings.Contains(all.String(), tc.finding) {
				t.Errorf("findings:\n%s\nwant one containing %q", all.String(), tc.finding)
			}
		})
	}
}

// TestAnyDropped: the exit status of convert follows it.
func TestAnyDropped(t *testing.T) {
	if AnyDropped([]Finding{{Status: Converted}, {Status: Differs}}) {
		t.Error("differences counted as dropped")
	}
	if !AnyDropped([]Finding{{Status: Converted}, {Status: Dropped}}) {
		t.Error("a drop not counted")
	}
}

// TestInvalid: values CoreDNS takes that serve refuses are errors naming
// the field.
func TestInvalid(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"duration without unit", ".:53 {\n forward . 10.0.0.1 {\n  expire 10\n }\n}\n", `forward[0].expire: "10": not a duration`},
		{"duplicate upstream", ".:53 {\n forward . 10.0.0.1 10.0.0.1:53\n}\n", "forward[0].upstreams[1]"},
		{"policy", ".:53 {\n forward . 10.0.0.1 {\n  policy fastest\n }\n}\n", `forward[0].policy: "fastest"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(tc.text)}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := KubeDNS(map[string]string{"stubDomains": `{"a.example": ["not-an-ip"]}`}); err == nil || !strings.Contains(err.Error(), "forward[1].upstreams[0]") {
		t.Errorf("kube-dns: got %v", err)
	}
}
