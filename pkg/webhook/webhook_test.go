package webhook

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func ptr[T any](v T) *T { return &v }

const longName = "a-rather-long-hostname" // 22 characters

func fqdnTooLong(p *corev1.Pod) {
	p.Spec.Hostname = longName
	p.Spec.Subdomain = "a-long-subdomain-name"
	p.Spec.SetHostnameAsFQDN = ptr(true)
}

// TestValidate runs pods through the webhook over HTTPS and checks what the
// API server would get back.
func TestValidate(t *testing.T) {
	warnReviewer := testReviewer(t)
	denyReviewer := testReviewer(t)
	denyReviewer.DenyTrims = true
	denyPoolReviewer := testReviewer(t)
	denyPoolReviewer.DenyTrims = true
	denyPoolReviewer.Pools = []Pool{testPool(t, "legacy", map[string]string{"pool": "legacy"}, testNode,
		policy.Host{Nameservers: []string{"10.0.0.2"}, Searches: manySearches(30)})}
	// A systemd-resolved node: its stub and two upstreams.
	stubReviewer := &Reviewer{Default: testPool(t, "", nil, testNode,
		policy.Host{Nameservers: []string{"127.0.0.53", "10.0.0.2", "10.0.0.3"}, Options: []string{"edns0", "trust-ad"}})}
	poolReviewer := testReviewer(t)
	poolReviewer.Pools = []Pool{
		testPool(t, "legacy", map[string]string{"pool": "legacy"}, testNode,
			policy.Host{Nameservers: []string{"10.0.0.2"}, Searches: manySearches(30)}),
		testPool(t, "gpu", map[string]string{"accelerator": "gpu"}, testNode, testHost),
	}

	type want struct {
		allowed  bool
		fields   []string // causes, in order
		warnings []string // substrings, one per warning, in order
		message  string   // substring of status.message
	}
	cases := []struct {
		name     string
		reviewer *Reviewer
		pod      *corev1.Pod
		want     want
	}{
		{name: "cluster first", reviewer: warnReviewer, pod: pod("web-0"), want: want{allowed: true}},
		{name: "generateName and namespace from the request", reviewer: warnReviewer,
			pod:  pod("", func(p *corev1.Pod) { p.GenerateName = "web-"; p.Namespace = "" }),
			want: want{allowed: true}},
		{name: "fqdn fits", reviewer: warnReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Spec.Hostname = "web-0"
			p.Spec.Subdomain = "web"
			p.Spec.SetHostnameAsFQDN = ptr(true)
		}), want: want{allowed: true}},
		{name: "fqdn too long", reviewer: warnReviewer, pod: pod("web-0", fqdnTooLong), want: want{
			fields:  []string{"spec.setHostnameAsFQDN"},
			message: `Pod "web-0" is invalid: spec.setHostnameAsFQDN: Invalid value: true: the pod's FQDN "a-rather-long-hostname.a-long-subdomain-name.default.svc.cluster.local" is 70 characters and the kernel hostname holds at most 64`,
		}},
		{name: "fqdn too long without the flag", reviewer: warnReviewer, pod: pod("web-0", fqdnTooLong, func(p *corev1.Pod) {
			p.Spec.SetHostnameAsFQDN = nil
		}), want: want{allowed: true}},
		{name: "autopath on Default", reviewer: warnReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Annotations = map[string]string{policy.AnnotationDNSPolicy: string(policy.ClusterFirstWithAutopath)}
			p.Spec.DNSPolicy = corev1.DNSDefault
		}), want: want{fields: []string{"metadata.annotations[dnsconfigurer.io/dns-policy]"}}},
		{name: "autopath on hostNetwork ClusterFirst", reviewer: warnReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Annotations = map[string]string{policy.AnnotationDNSPolicy: string(policy.ClusterFirstWithAutopath)}
			p.Spec.HostNetwork = true
		}), want: want{fields: []string{"metadata.annotations[dnsconfigurer.io/dns-policy]"}}},
		{name: "autopath on ClusterFirst", reviewer: warnReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Annotations = map[string]string{policy.AnnotationDNSPolicy: string(policy.ClusterFirstWithAutopath)}
		}), want: want{allowed: true}},
		{name: "several violations, one cause each", reviewer: warnReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Annotations = map[string]string{policy.AnnotationDNSPolicy: "Autopath"}
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: ""}}}
		}), want: want{
			fields:  []string{"spec.dnsConfig.options[0]", "metadata.annotations[dnsconfigurer.io/dns-policy]"},
			message: `Pod "web-0" is invalid: [spec.dnsConfig.options[0]: Required value: must not be empty, metadata.annotations[dnsconfigurer.io/dns-policy]: Unsupported value: "Autopath"`,
		}},
		{name: "four nameservers after the merge warn", reviewer: warnReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9"}}
		}), want: want{allowed: true, warnings: []string{`dnsconfigurer: spec.dnsConfig.nameservers: Invalid value: ["10.96.0.10","1.1.1.1","8.8.8.8","9.9.9.9"]: after merging`}}},
		{name: "four nameservers after the merge deny", reviewer: denyReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9"}}
		}), want: want{fields: []string{"spec.dnsConfig.nameservers"}, message: `dropping ["9.9.9.9"]`}},
		{name: "hostNetwork Default: the node's loopback stub is handed over and counts", reviewer: stubReviewer, pod: pod("agent", func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.DNSPolicy = corev1.DNSDefault
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}}
		}), want: want{allowed: true, warnings: []string{`dnsconfigurer: spec.dnsConfig.nameservers: Invalid value: ["127.0.0.53","10.0.0.2","10.0.0.3","1.1.1.1"]: after merging`}}},
		{name: "hostNetwork ClusterFirst falls back to the node's file, loopback stub included", reviewer: stubReviewer, pod: pod("agent", func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}}
		}), want: want{allowed: true, warnings: []string{`dnsconfigurer: spec.dnsConfig.nameservers: Invalid value: ["127.0.0.53","10.0.0.2","10.0.0.3","1.1.1.1"]: after merging`}}},
		{name: "Default in its own network namespace: the loopback stub is dropped and the pod fits", reviewer: stubReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Spec.DNSPolicy = corev1.DNSDefault
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}}
		}), want: want{allowed: true}},
		{name: "search list over 32 after the merge warns", reviewer: warnReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: manySearches(29)}
		}), want: want{allowed: true, warnings: []string{`dnsconfigurer: spec.dnsConfig.searches: Invalid value: ["team-00.corp.example.com","team-01.corp.example.com","team-02.corp.example.com",... 26 more]: after merging with the node's DNS the search list has 33 entries and the node keeps 32`}}},
		{name: "search list that fits", reviewer: warnReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: manySearches(28)}
		}), want: want{allowed: true}},
		{name: "trim and error together", reviewer: warnReviewer, pod: pod("web-0", fqdnTooLong, func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9"}}
		}), want: want{fields: []string{"spec.setHostnameAsFQDN"}, warnings: []string{`dnsconfigurer: spec.dnsConfig.nameservers: Invalid value: ["10.96.0.10","1.1.1.1","8.8.8.8","9.9.9.9"]`}}},
		{name: "node pool by nodeSelector", reviewer: poolReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"pool": "legacy", "zone": "a"}
		}), want: want{allowed: true, warnings: []string{`dnsconfigurer: spec.dnsConfig.searches: the search list has 33 entries from the cluster domains and the node's resolv.conf alone`}}},
		{name: "trims deny, but only the node's domains are dropped", reviewer: denyPoolReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"pool": "legacy"}
		}), want: want{allowed: true, warnings: []string{`the search list has 33 entries from the cluster domains and the node's resolv.conf alone, and the node keeps 32`}}},
		{name: "trims deny, the pod's own domain dropped", reviewer: denyPoolReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"pool": "legacy"}
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: []string{"mine.example"}}
		}), want: want{fields: []string{"spec.dnsConfig.searches"}, message: `dropping ["team-29.corp.example.com","mine.example"]`}},
		{name: "outside every node pool", reviewer: poolReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"pool": "other"}
		}), want: want{allowed: true}},
		{name: "two node pools, one trims", reviewer: poolReviewer, pod: pod("web-0", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"pool": "legacy", "accelerator": "gpu"}
		}), want: want{allowed: true, warnings: []string{`(on node pool "legacy")`}}},
		{name: "two node pools, both fail", reviewer: poolReviewer, pod: pod("web-0", fqdnTooLong, func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"pool": "legacy", "accelerator": "gpu"}
		}), want: want{fields: []string{"spec.setHostnameAsFQDN"}, warnings: []string{`(on node pool "legacy")`}}},
	}
	servers := map[*Reviewer]*testServer{}
	for _, r := range []*Reviewer{warnReviewer, denyReviewer, poolReviewer, denyPoolReviewer, stubReviewer} {
		servers[r] = startServer(t, r)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := servers[tc.reviewer]
			body := podReview(t, tc.pod)
			code, review, raw := post(t, ts.client(t), ts.url, body)
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, raw)
			}
			resp := review.Response
			if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" || review.Request != nil {
				t.Errorf("response envelope: %s", raw)
			}
			if resp == nil || resp.UID != "5bdc1a0b-5ad0-4c83-a8a4-1f2b3c4d5e6f" {
				t.Fatalf("response without the request's uid: %s", raw)
			}
			if resp.Allowed != tc.want.allowed {
				t.Fatalf("allowed = %v, want %v: %s", resp.Allowed, tc.want.allowed, raw)
			}
			if len(resp.Warnings) != len(tc.want.warnings) {
				t.Fatalf("warnings = %q, want %d matching %q", resp.Warnings, len(tc.want.warnings), tc.want.warnings)
			}
			for i, w := range tc.want.warnings {
				if !strings.Contains(resp.Warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, resp.Warnings[i], w)
				}
				if n := len([]rune(resp.Warnings[i])); n > maxWarningRunes {
					t.Errorf("warning %d is %d runes, over %d: %q", i, n, maxWarningRunes, resp.Warnings[i])
				}
			}
			if resp.Allowed {
				if resp.Result != nil {
					t.Errorf("allowed with a status: %s", raw)
				}
				return
			}
			st := resp.Result
			if st == nil || st.Status != metav1.StatusFailure || st.Code != 422 || st.Reason != metav1.StatusReasonInvalid || st.Details == nil {
				t.Fatalf("denial status: %s", raw)
			}
			if st.Details.Kind != "Pod" || st.Details.Name != tc.pod.Name {
				t.Errorf("details = %+v", st.Details)
			}
			var fields []string
			for _, c := range st.Details.Causes {
				fields = append(fields, c.Field)
				if c.Message == "" || c.Type == "" {
					t.Errorf("cause without a message or type: %+v", c)
				}
				if !strings.Contains(st.Message, c.Field+": "+c.Message) {
					t.Errorf("message %q does not carry cause %q", st.Message, c.Field+": "+c.Message)
				}
			}
			if strings.Join(fields, " ") != strings.Join(tc.want.fields, " ") {
				t.Errorf("cause fields = %q, want %q", fields, tc.want.fields)
			}
			if !strings.Contains(st.Message, tc.want.message) {
				t.Errorf("message = %q, want it to contain %q", st.Message, tc.want.message)
			}
		})
	}
	m := servers[warnReviewer].srv.m
	if got := testutil.ToFloat64(m.outcomes[OutcomeDenied]); got == 0 {
		t.Errorf("reviews_total{outcome=denied} = %v", got)
	}
	if got := testutil.ToFloat64(m.violations.WithLabelValues("spec.setHostnameAsFQDN", "deny")); got != 2 {
		t.Errorf("violations_total{field=spec.setHostnameAsFQDN,action=deny} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.violations.WithLabelValues("spec.dnsConfig.nameservers", "warn")); got != 2 {
		t.Errorf("violations_total{field=spec.dnsConfig.nameservers,action=warn} = %v, want 2", got)
	}
}

// TestNotAPod: anything but a Pod CREATE or a workload's CREATE and UPDATE
// is allowed, unchecked, with a warning saying so.
func TestNotAPod(t *testing.T) {
	ts := startServer(t, testReviewer(t))
	c := ts.client(t)
	cm := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"default"}}`)
	podRaw, _ := json.Marshal(pod("web-0", fqdnTooLong))
	cases := []struct {
		name    string
		req     admissionv1.AdmissionRequest
		warning string
	}{
		{"configmap", admissionv1.AdmissionRequest{UID: "u1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: cm}}, `a ConfigMap (resource "configmaps") is not a Pod`},
		{"deployment scale", admissionv1.AdmissionRequest{UID: "u2", Kind: metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
			Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, SubResource: "scale", Operation: admissionv1.Update,
			Object: runtime.RawExtension{Raw: []byte(`{}`)}}, `a Scale.autoscaling (resource "deployments/scale") is not a Pod`},
		{"pod subresource", admissionv1.AdmissionRequest{UID: "u3", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: "ephemeralcontainers", Operation: admissionv1.Update,
			Object: runtime.RawExtension{Raw: podRaw}}, `(resource "pods/ephemeralcontainers") is not a Pod`},
		{"pod update", admissionv1.AdmissionRequest{UID: "u4", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Operation: admissionv1.Update,
			Object: runtime.RawExtension{Raw: podRaw}}, "operation UPDATE is not checked"},
		{"pod delete", admissionv1.AdmissionRequest{UID: "u5", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Operation: admissionv1.Delete}, "operation DELETE is not checked"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, review, raw := post(t, c, ts.url, reviewJSON(t, &tc.req))
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, raw)
			}
			r := review.Response
			if !r.Allowed || r.UID != tc.req.UID || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], tc.warning) {
				t.Errorf("response %s, want allowed with a warning containing %q", raw, tc.warning)
			}
		})
	}
	if got := testutil.ToFloat64(ts.srv.m.outcomes[OutcomeSkipped]); got != float64(len(cases)) {
		t.Errorf("reviews_total{outcome=skipped} = %v, want %d", got, len(cases))
	}
}

// TestBadRequests: whatever is not a well-formed AdmissionReview gets an
// HTTP error with a reason, never a decision and never a panic.
func TestBadRequests(t *testing.T) {
	ts := startServer(t, testReviewer(t), WithMaxRequestBytes(64<<10))
	c := ts.client(t)
	good := podReview(t, pod("web-0"))
	big := podReview(t, pod("web-0", func(p *corev1.Pod) {
		p.Annotations = map[string]string{"blob": strings.Repeat("x", 70<<10)}
	}))
	cases := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        []byte
		chunked     bool // hide the length, so that only the read cap sees it
		code        int
		reason      string
	}{
		{name: "not JSON", body: []byte("apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\n"), code: 400, reason: "the body is not a JSON AdmissionReview: invalid character"},
		{name: "truncated JSON", body: good[:len(good)/2], code: 400, reason: "the body is not a JSON AdmissionReview: unexpected end of JSON input"},
		{name: "JSON array", body: []byte(`[1,2]`), code: 400, reason: "the body is not a JSON AdmissionReview"},
		{name: "empty body", body: nil, code: 400, reason: "the body is not a JSON AdmissionReview: unexpected end of JSON input"},
		{name: "wrong kind", body: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}`), code: 400,
			reason: `the body is apiVersion "v1" kind "Pod"; an admission.k8s.io/v1 AdmissionReview is expected`},
		{name: "v1beta1 review", body: bytes.Replace(good, []byte(`admission.k8s.io/v1"`), []byte(`admission.k8s.io/v1beta1"`), 1), code: 400,
			reason: `the body is apiVersion "admission.k8s.io/v1beta1" kind "AdmissionReview"`},
		{name: "missing request", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), code: 400, reason: "the AdmissionReview has no request"},
		{name: "missing uid", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"operation":"CREATE","object":{}}}`), code: 400, reason: "request.uid is empty"},
		{name: "missing object", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"operation":"CREATE"}}`), code: 400, reason: "request.object is empty for a Pod CREATE"},
		{name: "object not a pod", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"operation":"CREATE","object":{"spec":"nope"}}}`), code: 400, reason: "request.object is not a JSON Pod"},
		{name: "repeated request", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"},"request":{"uid":"v"}}`), code: 400,
			reason: "the body is not a JSON AdmissionReview: request: duplicate key"},
		{name: "repeated object", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"operation":"CREATE","object":{"spec":{}},"object":{}}}`), code: 400,
			reason: "the body is not a JSON AdmissionReview: request.object: duplicate key"},
		{name: "repeated options", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"operation":"CREATE","object":{"spec":{"dnsConfig":{"options":[{},{}],"options":[]}}}}}`), code: 400,
			reason: "request.object is not a JSON Pod: spec.dnsConfig.options: duplicate key"},
		{name: "wrong type in review", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":7}}`), code: 400, reason: "the body is not a JSON AdmissionReview: json: cannot unmarshal number"},
		{name: "oversized", body: big, code: 413, reason: "over the limit of 65536"},
		{name: "oversized without a length", body: big, chunked: true, code: 413, reason: "request body is over the limit of 65536 bytes"},
		{name: "wrong content type", contentType: "application/yaml", body: good, code: 415, reason: `Content-Type "application/yaml" not supported`},
		{name: "no content type", contentType: "-", body: good, code: 415, reason: `Content-Type "" not supported`},
		{name: "GET", method: http.MethodGet, code: 405, reason: "method GET not allowed"},
		{name: "PUT", method: http.MethodPut, body: good, code: 405, reason: "method PUT not allowed"},
		{name: "unknown path", path: "/mutate", body: good, code: 404, reason: "404 page not found"},
		{name: "json with charset", contentType: "application/json; charset=utf-8", body: good, code: 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method, path, ct := tc.method, tc.path, tc.contentType
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = PathValidate
			}
			if ct == "" {
				ct = "application/json"
			}
			var body = bytes.NewReader(tc.body)
			req, err := http.NewRequestWithContext(t.Context(), method, ts.url+path, body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.chunked {
				req.ContentLength = -1
				req.Body = readerOnly{body}
			}
			if ct != "-" {
				req.Header.Set("Content-Type", ct)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out bytes.Buffer
			out.ReadFrom(resp.Body)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, out.String())
			}
			if !strings.Contains(out.String(), tc.reason) {
				t.Errorf("body %q, want it to contain %q", out.String(), tc.reason)
			}
			if tc.code == 405 && resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow = %q", resp.Header.Get("Allow"))
			}
		})
	}
	// The server is still healthy.
	resp, err := c.Get(ts.url + PathHealthz)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("healthz after bad requests: %d", resp.StatusCode)
	}
	if got := testutil.ToFloat64(ts.srv.m.requests.WithLabelValues(PathValidate, "400")); got != 14 {
		t.Errorf("requests_total{path=/validate,code=400} = %v, want 14", got)
	}
}

type readerOnly struct{ r *bytes.Reader }

func (r readerOnly) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r readerOnly) Close() error               { return nil }

// TestHTTPSOnly: plain HTTP and TLS below 1.2 are refused.
func TestHTTPSOnly(t *testing.T) {
	ts := startServer(t, testReviewer(t))
	plain := &http.Client{Timeout: 5 * time.Second}
	resp, err := plain.Get("http" + strings.TrimPrefix(ts.url, "https") + PathHealthz)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatalf("plain HTTP got 200")
		}
	}
	old := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: ts.ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Get(ts.url + PathHealthz); err == nil {
		resp.Body.Close()
		t.Fatalf("TLS 1.1 handshake succeeded")
	}
	old.CloseIdleConnections()
	resp, err = ts.client(t).Get(ts.url + PathHealthz)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Errorf("TLS state %+v", resp.TLS)
	}
}
