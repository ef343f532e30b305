package webhook

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// TestWarningLength: the longest trims the engine reports still make
// one-line warnings short enough for the API server to pass on whole.
func TestWarningLength(t *testing.T) {
	// 25 entries of 80 characters: 2024 with the spaces, within the API's
	// 2048, and over it once the node's cluster and host domains come first.
	long := make([]string, 25)
	for i := range long {
		long[i] = strings.Repeat(string(rune('a'+i%26)), 68) + ".example.com"
	}
	r := testReviewer(t)
	cases := []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{"long search list", pod("web-0", func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: long}
		}), []string{"dnsconfigurer: spec.dnsConfig.searches: Invalid value: [", "... 24 more]", "dropping [\"yyyy"}},
		{"many nameservers", pod("web-0", func(p *corev1.Pod) {
			p.Spec.DNSPolicy = corev1.DNSDefault
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"2001:db8::1", "2001:db8::2", "2001:db8::3"}}
		}), []string{"dropping [\"2001:db8::3\"]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := r.Default.Engine.ValidateNode(podspec.Input(tc.pod), r.Default.Host)
			if len(v.Trims) != 1 {
				t.Fatalf("trims %v", v.Trims)
			}
			w := warning(v.Trims[0])
			if n := utf8.RuneCountInString(w); n > maxWarningRunes || strings.ContainsAny(w, "\n\r") {
				t.Errorf("warning of %d runes (max %d) or several lines: %q", n, maxWarningRunes, w)
			}
			for _, s := range tc.want {
				if !strings.Contains(w, s) {
					t.Errorf("warning %q lacks %q", w, s)
				}
			}
		})
	}
}

// TestDecodePod: the slim decoding gives the engine the same input as a
// full corev1.Pod decoding, for pods that set every field it reads.
func TestDecodePod(t *testing.T) {
	full := pod("web-0", fqdnTooLong, func(p *corev1.Pod) {
		p.GenerateName = "web-"
		p.UID = "0c5e1a2b-0000-4000-8000-000000000001"
		p.Annotations = map[string]string{policy.AnnotationDNSPolicy: string(policy.ClusterFirstWithAutopath), "other": "x"}
		p.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
		p.Spec.HostNetwork = true
		p.Spec.HostnameOverride = ptr("override")
		p.Spec.NodeSelector = map[string]string{"pool": "a"}
		p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"},
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}, {Name: "edns0"}}}
	})
	for _, p := range []*corev1.Pod{full, typicalPod(), pod("x")} {
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var want corev1.Pod
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		got, err := decodePod(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(podspec.Input(got), podspec.Input(&want)) || !reflect.DeepEqual(got.Spec.NodeSelector, want.Spec.NodeSelector) {
			t.Errorf("slim decoding of %s:\n got %+v\nwant %+v", p.Name, podspec.Input(got), podspec.Input(&want))
		}
	}
	// Every field of policy.Input is set by the full pod above, so a field
	// added to podspec.Input shows up here until decodePod reads it.
	in := reflect.ValueOf(podspec.Input(full))
	for i := range in.NumField() {
		if in.Type().Field(i).Name == "NamespacePolicy" {
			continue // the namespace's label, not the pod's
		}
		if in.Field(i).IsZero() {
			t.Errorf("policy.Input.%s is not covered by this test's pod", in.Type().Field(i).Name)
		}
	}
}

func TestShortenList(t *testing.T) {
	for in, want := range map[string]string{
		`[]`:                       `[]`,
		`["a"]`:                    `["a"]`,
		`["a","b","c","d"]`:        `["a","b","c","d"]`,
		`["a","b","c","d","e"]`:    `["a","b","c",... 2 more]`,
		`["a","b","c","d","e",""]`: `["a","b","c",... 3 more]`,
	} {
		if got := shortenList(in, 3); got != want {
			t.Errorf("shortenList(%s) = %s, want %s", in, got, want)
		}
	}
}

// FuzzReview: no body makes the decoding and the review panic, and every
// request is either a 400 reason or a response carrying the request's uid.
func FuzzReview(f *testing.F) {
	f.Add(podReview(f, pod("web-0")))
	f.Add(podReview(f, pod("web-0", fqdnTooLong)))
	f.Add(podReview(f, pod("web-0", func(p *corev1.Pod) {
		p.Annotations = map[string]string{policy.AnnotationDNSPolicy: string(policy.ClusterFirstWithAutopath)}
		p.Spec.DNSPolicy = corev1.DNSNone
		p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "1.1.1.2", "1.1.1.3", "1.1.1.4"}, Searches: manySearches(40)}
	})))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"operation":"CREATE","object":{"spec":{"hostname":"-","subdomain":"x","setHostnameAsFQDN":true}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"operation":"CREATE","object":null}}`))
	f.Add([]byte(`null`))
	r := testReviewer(f)
	deny := testReviewer(f)
	deny.DenyTrims = true
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, rv := range []*Reviewer{r, deny} {
			review, err := decodeReview(body)
			if err == nil {
				resp, outcome, _, err := rv.Review(review.Request)
				if err == nil {
					if resp == nil || resp.UID != review.Request.UID || outcome == "" || resp.Allowed == (resp.Result != nil) {
						t.Fatalf("response %+v, outcome %q for uid %q", resp, outcome, review.Request.UID)
					}
					continue
				}
				var bad *BadRequestError
				if !errors.As(err, &bad) || bad.Reason == "" {
					t.Fatalf("error %v is not a reason for a 400", err)
				}
				continue
			}
			var bad *BadRequestError
			if !errors.As(err, &bad) || bad.Reason == "" {
				t.Fatalf("error %v is not a reason for a 400", err)
			}
		}
	})
}
