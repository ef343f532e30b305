package v1alpha1

import (
	"testing"
	"time"
)

func TestWebhookDefaults(t *testing.T) {
	w := defaulted[WebhookConfiguration](t)
	if w.Listen != ":8443" || w.MaxRequestBytes != 6<<20 || w.Trims != TrimsWarn || w.Workloads != WorkloadsCheck || w.Cluster.Domain() != "cluster.local" || w.Cluster.NodeOS != "linux" {
		t.Errorf("defaults: %+v", w)
	}
	if w.Cluster.ResolvConf != nil {
		t.Errorf("cluster.resolvConf defaulted to %q; the webhook must not read a file", *w.Cluster.ResolvConf)
	}
	if r, wr := w.Timeouts(); r != 10*time.Second || wr != 10*time.Second {
		t.Errorf("timeouts %v %v", r, wr)
	}
	if p := w.BodyProgress(); p != 2*time.Second {
		t.Errorf("body progress timeout %v, want 2s", p)
	}
	// SetDefaults is idempotent.
	w.SetDefaults()
	if err := w.Validate(); err != nil {
		t.Errorf("second SetDefaults: %v", err)
	}
}

func TestWebhookValidate(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name string
		mod  func(*WebhookConfiguration)
		want string // "" for valid
	}{
		{"full", func(w *WebhookConfiguration) {
			w.TLSCertFile, w.TLSPrivateKeyFile = "/tls/tls.crt", "/tls/tls.key"
			w.Cluster.ClusterDNS = []string{"10.96.0.10", "fd00::a"}
			w.NodeResolver = NodeResolver{Nameservers: []string{"10.0.0.2"}, Searches: []string{"corp.example.", "."}, Options: []string{"ndots:2", "edns0"}}
			w.NodePools = []NodePool{
				{Name: "windows", NodeSelector: map[string]string{"kubernetes.io/os": "windows"}, NodeOS: "windows"},
				{Name: "legacy", NodeSelector: map[string]string{"pool": "legacy"}, NodeResolver: &NodeResolver{Disabled: true}, NodeLocalDNS: []string{"169.254.20.10"}},
			}
			w.Trims = TrimsDeny
		}, ""},
		{"resolvConf", func(w *WebhookConfiguration) { w.Cluster.ResolvConf = str("/etc/resolv.conf") }, "cluster.resolvConf: not used by the webhook"},
		{"empty resolvConf", func(w *WebhookConfiguration) { w.Cluster.ResolvConf = str("") }, "cluster.resolvConf"},
		{"cluster DNS", func(w *WebhookConfiguration) { w.Cluster.ClusterDNS = []string{"10.96.0.300"} }, `cluster.clusterDNS[0]: "10.96.0.300" is not an IP address`},
		{"node OS", func(w *WebhookConfiguration) { w.Cluster.NodeOS = "plan9" }, "cluster.nodeOS"},
		{"listen", func(w *WebhookConfiguration) { w.Listen = "8443" }, `listen: "8443" is not an address`},
		{"listen without port", func(w *WebhookConfiguration) { w.Listen = "127.0.0.1:" }, `listen: "127.0.0.1:"`},
		{"one TLS file", func(w *WebhookConfiguration) { w.TLSCertFile = "/tls.crt" }, "tlsCertFile and tlsPrivateKeyFile: give both or neither"},
		{"tiny body cap", func(w *WebhookConfiguration) { w.MaxRequestBytes = 100 }, "maxRequestBytes: 100 is too small"},
		{"bad timeout", func(w *WebhookConfiguration) { w.ReadTimeout = "10" }, `readTimeout: "10" is not a positive duration`},
		{"negative timeout", func(w *WebhookConfiguration) { w.WriteTimeout = "-1s" }, `writeTimeout: "-1s"`},
		{"body progress timeout", func(w *WebhookConfiguration) { w.BodyProgressTimeout = "0s" }, `bodyProgressTimeout: "0s" is not a positive duration such as "10s"`},
		{"client CA", func(w *WebhookConfiguration) { w.ClientCAFile = "/etc/dnsconfigurer/client-ca/ca.crt" }, ""},
		{"trims", func(w *WebhookConfiguration) { w.Trims = "drop" }, `trims: "drop" must be "warn" or "deny"`},
		{"workloads skip", func(w *WebhookConfiguration) { w.Workloads = WorkloadsSkip }, ""},
		{"workloads", func(w *WebhookConfiguration) { w.Workloads = "off" }, `workloads: "off" must be "check" or "skip"`},
		{"default policy", func(w *WebhookConfiguration) { w.DefaultDNSPolicy = "Autopath" }, `defaultDNSPolicy: "Autopath" must be "ClusterFirst" or "ClusterFirstWithAutopath"`},
		{"ndots", func(w *WebhookConfiguration) { w.Ndots = ptr(20) }, `ndots: 20 must be between 0 and 15`},
		{"resolver nameserver", func(w *WebhookConfiguration) { w.NodeResolver.Nameservers = []string{"dns.example"} }, `nodeResolver.nameservers[0]: "dns.example" is not an IP address`},
		{"resolver search", func(w *WebhookConfiguration) { w.NodeResolver.Searches = []string{"a b"} }, `nodeResolver.searches[0]`},
		{"resolver option", func(w *WebhookConfiguration) { w.NodeResolver.Options = []string{""} }, `nodeResolver.options[0]`},
		{"disabled with entries", func(w *WebhookConfiguration) {
			w.NodeResolver = NodeResolver{Disabled: true, Searches: []string{"x"}}
		}, "nodeResolver.disabled: true excludes"},
		{"pool name", func(w *WebhookConfiguration) {
			w.NodePools = []NodePool{{Name: "GPU", NodeSelector: map[string]string{"a": "b"}}}
		}, `nodePools[0].name: "GPU" must be a DNS label`},
		{"pool name twice", func(w *WebhookConfiguration) {
			w.NodePools = []NodePool{{Name: "a", NodeSelector: map[string]string{"a": "b"}}, {Name: "a", NodeSelector: map[string]string{"a": "c"}}}
		}, `nodePools[1].name: "a" is used twice`},
		{"pool without selector", func(w *WebhookConfiguration) { w.NodePools = []NodePool{{Name: "a"}} }, "nodePools[0].nodeSelector: required"},
		{"pool resolver", func(w *WebhookConfiguration) {
			w.NodePools = []NodePool{{Name: "a", NodeSelector: map[string]string{"a": "b"}, NodeResolver: &NodeResolver{Nameservers: []string{"x"}}}}
		}, "nodePools[0].nodeResolver.nameservers[0]"},
		{"pool OS", func(w *WebhookConfiguration) {
			w.NodePools = []NodePool{{Name: "a", NodeSelector: map[string]string{"a": "b"}, NodeOS: "darwin"}}
		}, "nodePools[0].nodeOS"},
		{"pool node-local DNS", func(w *WebhookConfiguration) {
			w.NodePools = []NodePool{{Name: "a", NodeSelector: map[string]string{"a": "b"}, NodeLocalDNS: []string{"local"}}}
		}, "nodePools[0].nodeLocalDNS[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := WebhookConfiguration{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: WebhookKind}}
			tc.mod(&w)
			w.SetDefaults()
			wantFieldError(t, w.Validate(), tc.want)
		})
	}
}

func TestWebhookCheckComplete(t *testing.T) {
	for _, tc := range []struct {
		cert, key string
		ok        bool
	}{{"", "", false}, {"/tls.crt", "", false}, {"", "/tls.key", false}, {"/tls.crt", "/tls.key", true}} {
		w := WebhookConfiguration{TLSCertFile: tc.cert, TLSPrivateKeyFile: tc.key}
		if err := w.CheckComplete(); (err == nil) != tc.ok {
			t.Errorf("cert %q key %q: CheckComplete = %v", tc.cert, tc.key, err)
		}
	}
}
