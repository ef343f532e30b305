package podspec

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{name: "yaml", in: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n"},
		{name: "json", in: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}`},
		{name: "leading separator and comments", in: "# pod\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n---\n# trailing\n"},
		{name: "empty", in: "\n# nothing\n", wantErr: "pod manifest is empty"},
		{name: "two documents", in: "apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: Pod\n", wantErr: "has 2 documents"},
		{name: "wrong kind", in: "apiVersion: v1\nkind: Service\n", wantErr: `kind "Service"; a v1 Pod is expected`},
		{name: "wrong group", in: "apiVersion: apps/v1\nkind: Pod\n", wantErr: `apiVersion "apps/v1"`},
		{name: "unknown field named", in: "apiVersion: v1\nkind: Pod\nspec:\n  dnsPolicyy: None\n", wantErr: `unknown field "dnsPolicyy"`},
		{name: "wrong type named", in: "apiVersion: v1\nkind: Pod\nspec:\n  hostNetwork: yes please\n", wantErr: "hostNetwork"},
		{name: "not yaml", in: "{{{", wantErr: "not valid YAML or JSON"},
		{name: "crlf", in: "apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: a\r\n---\r\n"},
		{name: "crlf two documents", in: "apiVersion: v1\r\nkind: Pod\r\n---\r\napiVersion: v1\r\nkind: Pod\r\n", wantErr: "has 2 documents"},
		{name: "content after separator", in: "--- {apiVersion: v1, kind: Pod}\n", wantErr: "invalid Yaml document separator"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := Decode(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			if err != nil || pod.Name != "a" {
				t.Fatalf("pod %v err %v", pod, err)
			}
		})
	}
	if _, err := Decode(strings.NewReader(strings.Repeat(" ", MaxManifestSize+1))); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized manifest: %v", err)
	}
}

func TestDefaultAndInput(t *testing.T) {
	pod, err := DecodeBytes([]byte(`
apiVersion: v1
kind: Pod
metadata:
  generateName: job-
  uid: u-1
  annotations: {dnsconfigurer.io/dns-policy: ClusterFirstWithAutopath}
spec:
  hostNetwork: true
  hostname: h
  subdomain: s
  setHostnameAsFQDN: true
  dnsConfig:
    nameservers: [1.1.1.1]
    searches: [a.example]
    options: [{name: ndots, value: "2"}, {name: edns0}]
`))
	if err != nil {
		t.Fatal(err)
	}
	Default(pod)
	two := "2"
	want := policy.Input{Name: "job-xxxxx", Namespace: "default", UID: "u-1", Policy: policy.ClusterFirst,
		PolicyAnnotation: "ClusterFirstWithAutopath", HostNetwork: true, Hostname: "h", Subdomain: "s", SetHostnameAsFQDN: true,
		DNSConfig: &policy.DNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"},
			Options: []policy.Option{{Name: "ndots", Value: &two}, {Name: "edns0"}}}}
	if got := Input(pod); !reflect.DeepEqual(got, want) {
		t.Errorf("Input = %+v\nwant %+v", got, want)
	}
}

// TestFieldsKeepWhatInputReads binds the field list to the conversion: a pod
// with every field set (and fields the engine does not read) converts the
// same whole, reduced to Fields, cached as Fields.Pod, and decoded from JSON
// into Fields; and FieldsOf leaves no field of Meta or Spec unset.
func TestFieldsKeepWhatInputReads(t *testing.T) {
	yes, two, over := true, "2", "override"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", GenerateName: "web-", Namespace: "shop", UID: "u-1",
			Annotations: map[string]string{policy.AnnotationDNSPolicy: string(policy.ClusterFirstWithAutopath), "other": "x"},
			Labels:      map[string]string{"app": "web"}, ResourceVersion: "7"},
		Spec: corev1.PodSpec{DNSPolicy: corev1.DNSClusterFirstWithHostNet, HostNetwork: true, Hostname: "h", Subdomain: "s",
			HostnameOverride: &over, SetHostnameAsFQDN: &yes, NodeName: "n1",
			DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{"192.0.2.1"}, Searches: []string{"a.example"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "edns0"}}},
			Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
	want := Input(pod)
	f := FieldsOf(pod)
	for _, v := range []reflect.Value{reflect.ValueOf(f.Metadata), reflect.ValueOf(f.Spec)} {
		for i := 0; i < v.NumField(); i++ {
			if v.Field(i).IsZero() {
				t.Errorf("FieldsOf leaves %s.%s unset", v.Type().Name(), v.Type().Field(i).Name)
			}
		}
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	var decoded Fields
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]policy.Input{"Fields": f.Input(), "Fields.Pod": Input(f.Pod()), "JSON": decoded.Input()} {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v\nwant %+v", name, got, want)
		}
	}
}

// TestDocuments: the manifest is split by apimachinery's YAML reader, which
// only splits on "---" at the start of a line.
func TestDocuments(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n"
	tests := []struct {
		name string
		in   string
		want []string // a substring of each document kept
	}{
		{name: "one", in: pod, want: []string{"name: a"}},
		{name: "--- inside a block scalar", in: pod + "  annotations:\n    note: |\n      before\n      ---\n      after\n",
			want: []string{"      ---\n      after"}},
		{name: "--- inside a string", in: pod + "  annotations: {note: \"a\n    --- b\"}\n", want: []string{"--- b"}},
		{name: "leading separator", in: "---\n" + pod, want: []string{"name: a"}},
		{name: "separator with a comment", in: "--- # the pod\n" + pod + "--- # no more\n", want: []string{"name: a"}},
		{name: "crlf", in: strings.ReplaceAll("---\n"+pod+"---\n"+pod, "\n", "\r\n"), want: []string{"name: a\n", "name: a\n"}},
		{name: "empty documents", in: "---\n---\n\n---\n# only a comment\n---\nnull\n---\n" + pod + "---\n", want: []string{"name: a"}},
		{name: "nothing", in: "", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := documents([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(docs) != len(tc.want) {
				t.Fatalf("%d documents %q, want %d", len(docs), docs, len(tc.want))
			}
			for i, d := range docs {
				if !strings.Contains(string(d), tc.want[i]) || strings.Contains(string(d), "\r") {
					t.Errorf("document %d = %q, want it to contain %q and no CR", i, d, tc.want[i])
				}
			}
		})
	}
}
