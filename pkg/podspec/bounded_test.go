package podspec

import (
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// webhookFields is what the webhook decodes of a pod: the engine's fields
// and the node selector.
type webhookFields struct {
	Fields
	Spec struct {
		Spec
		NodeSelector NodeSelector `json:"nodeSelector"`
	} `json:"spec"`
}

func TestMembers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`[]`, 0}, {` [ ] `, 0}, {`null`, 0}, {`"x"`, 0}, {`{}`, 0},
		{`["a"]`, 1}, {`[1,2,3]`, 3}, {`[{},{}]`, 2}, {`[[1,2],[3]]`, 2},
		{`["a,b","c\",d"]`, 2}, {`{"a":"b","c":[1,2]}`, 2}, {`[ "\\", "]" ]`, 2},
	} {
		if got := members([]byte(tc.in)); got != tc.want {
			t.Errorf("members(%s) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestBoundedDecode: a list or map past its bound is an error naming the
// field, before its elements are made; at the bound it decodes.
func TestBoundedDecode(t *testing.T) {
	ann := func(n, valueLen int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"k` + strings.Repeat("0", 6) + string(rune('a'+i%26)) + strings.Repeat("y", i/26%5) + `":"` + strings.Repeat("v", valueLen) + `"`)
		}
		b.WriteString("}")
		return b.String()
	}
	for _, tc := range []struct {
		name, json, err string
	}{
		{"searches at the bound", `{"spec":{"dnsConfig":{"searches":` + list(`"a"`, MaxDNSListEntries) + `}}}`, ""},
		{"searches past it", `{"spec":{"dnsConfig":{"searches":` + list(`"a"`, MaxDNSListEntries+1) + `}}}`,
			"spec.dnsConfig.searches: 1001 entries; the webhook reads at most 1000 (the API server allows 32)"},
		{"nameservers past it", `{"spec":{"dnsConfig":{"nameservers":` + list(`"1"`, 5000) + `}}}`,
			"spec.dnsConfig.nameservers: 5000 entries; the webhook reads at most 1000 (the API server allows 3)"},
		{"options past it", `{"spec":{"dnsConfig":{"options":` + list(`{}`, 1001) + `}}}`,
			"spec.dnsConfig.options: 1001 entries; the webhook reads at most 1000 (the API server has no limit)"},
		{"node selector past it", `{"spec":{"nodeSelector":{` + strings.TrimSuffix(strings.Repeat(`"k":"v",`, 1001), ",") + `}}}`,
			"spec.nodeSelector: 1001 entries; the webhook reads at most 1000"},
		{"annotations within the API limit", `{"metadata":{"annotations":` + ann(100, 2000) + `}}`, ""},
		{"annotations past it", `{"metadata":{"annotations":` + ann(130, 2100) + `}}`,
			"metadata.annotations: 274300 bytes of keys and values; the API server allows 262144"},
		{"annotations' JSON past any fit", `{"metadata":{"annotations":{"a":"` + strings.Repeat(`\u0041`, MaxAnnotationBytes+1) + `"}}}`,
			"metadata.annotations: 1572878 bytes of JSON; the API server allows 262144 bytes of keys and values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f webhookFields
			err := Unmarshal([]byte(tc.json), &f)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "" && (err == nil || err.Error() != tc.err):
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}

// list is "[" n copies of elem "]".
func list(elem string, n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + "]"
}

// TestDuplicateKeys: a key the decode reads, repeated in its object, is
// an error naming it, at every level the webhook decodes (issue 66 row
// 3). encoding/json decodes every copy while a bound counted one.
func TestDuplicateKeys(t *testing.T) {
	for _, tc := range []struct{ name, json, field string }{
		{"options", `{"spec":{"dnsConfig":{"options":[{}],"options":[]}}}`, "spec.dnsConfig.options"},
		{"options past the bound, then empty", `{"spec":{"dnsConfig":{"options":` + list(`{}`, 5000) + `,"options":[]}}}`, "spec.dnsConfig.options"},
		{"searches", `{"spec":{"dnsConfig":{"searches":` + list(`"a"`, 5000) + `,"searches":[]}}}`, "spec.dnsConfig.searches"},
		{"nameservers", `{"spec":{"dnsConfig":{"nameservers":` + list(`"1"`, 5000) + `,"nameservers":null}}}`, "spec.dnsConfig.nameservers"},
		{"an option's name", `{"spec":{"dnsConfig":{"options":[{"name":"a"},{"name":"a","value":"1","name":"b"}]}}}`, "spec.dnsConfig.options[1].name"},
		{"dnsConfig", `{"spec":{"dnsConfig":{"searches":["a"]},"dnsConfig":{}}}`, "spec.dnsConfig"},
		{"dnsPolicy", `{"spec":{"dnsPolicy":"None","dnsPolicy":"ClusterFirst"}}`, "spec.dnsPolicy"},
		{"hostname", `{"spec":{"hostname":"a","hostname":"b"}}`, "spec.hostname"},
		{"spec", `{"spec":{"dnsPolicy":"None"},"spec":{}}`, "spec"},
		{"metadata", `{"metadata":{"name":"a"},"metadata":{"name":"b"}}`, "metadata"},
		{"name", `{"metadata":{"name":"a","name":"b"}}`, "metadata.name"},
		{"annotations", `{"metadata":{"annotations":{"a":"1"},"annotations":{"b":"2"}}}`, "metadata.annotations"},
		{"an annotation", `{"metadata":{"annotations":{"a":"1","b":"","a":"2"}}}`, "metadata.annotations.a"},
		{"nodeSelector", `{"spec":{"nodeSelector":{"a":"1"},"nodeSelector":{"b":"2"}}}`, "spec.nodeSelector"},
		{"a node selector key", `{"spec":{"nodeSelector":{"k":"1","k":"2"}}}`, "spec.nodeSelector.k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f webhookFields
			err := Unmarshal([]byte(tc.json), &f)
			var de *DuplicateKeyError
			if !errors.As(err, &de) || de.Field != tc.field {
				t.Fatalf("error %v, want %q", err, tc.field+": duplicate key")
			}
			if err.Error() != tc.field+": duplicate key" {
				t.Errorf("error %q", err)
			}
		})
	}
}

// TestDuplicateKeysInTemplates: Templates refuses a repeated key on the
// way to a workload's template and inside it.
func TestDuplicateKeysInTemplates(t *testing.T) {
	dns := `{"dnsConfig":{"options":` + list(`{}`, 5000) + `,"options":[]}}`
	for _, tc := range []struct{ kind, obj, err string }{
		{"Deployment", `{"spec":{"template":{"spec":` + dns + `}}}`, "Deployment spec.template: spec.dnsConfig.options: duplicate key"},
		{"Deployment", `{"spec":{"template":{"spec":{}},"template":{"spec":{}}}}`, "Deployment spec: template: duplicate key"},
		{"Deployment", `{"spec":{"template":{}},"spec":{"template":{}}}`, "Deployment: spec: duplicate key"},
		{"Deployment", `{"metadata":{"name":"a"},"metadata":{},"spec":{"template":{}}}`, "Deployment: metadata: duplicate key"},
		{"Deployment", `{"spec":{"template":{"metadata":{"annotations":{"a":"","a":""}}}}}`, "Deployment spec.template: metadata.annotations.a: duplicate key"},
		{"DaemonSet", `{"spec":{"template":{"spec":{"nodeSelector":{},"nodeSelector":{}}}}}`, "DaemonSet spec.template: spec.nodeSelector: duplicate key"},
		{"CronJob", `{"spec":{"jobTemplate":{"spec":{"template":{}}},"jobTemplate":{}}}`, "CronJob spec: jobTemplate: duplicate key"},
		{"CronJob", `{"spec":{"jobTemplate":{"spec":{"template":{"spec":` + dns + `}}}}}`, "CronJob spec.jobTemplate.spec.template: spec.dnsConfig.options: duplicate key"},
		{"PodTemplate", `{"template":{"spec":{}},"template":{}}`, "PodTemplate: template: duplicate key"},
		{"Pod", `{"spec":{"dnsConfig":{"searches":[],"searches":[]}}}`, "Pod: spec.dnsConfig.searches: duplicate key"},
	} {
		t.Run(tc.err, func(t *testing.T) {
			_, err := Templates(tc.kind, []byte(tc.obj))
			if err == nil || err.Error() != tc.err {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}

// TestCaseVariantKeys: field names match case-sensitively, as the API
// server reads them: a key differing only in case ("Options") is an
// unknown field, skipped and never decoded, so it neither fills the field
// nor costs memory. Map keys differing in case are different keys.
func TestCaseVariantKeys(t *testing.T) {
	none := webhookFields{}
	for _, tc := range []struct {
		name, json string
		want       func(*webhookFields)
	}{
		{"Options beside options", `{"spec":{"dnsConfig":{"Options":` + list(`{}`, 5000) + `,"options":[]}}}`,
			func(f *webhookFields) { f.Spec.DNSConfig = &DNSConfig{Options: []corev1.PodDNSConfigOption{}} }},
		{"OPTIONS alone", `{"spec":{"dnsConfig":{"OPTIONS":[{"name":"a"}]}}}`, func(f *webhookFields) { f.Spec.DNSConfig = &DNSConfig{} }},
		{"Searches", `{"spec":{"dnsConfig":{"searches":["a"],"Searches":` + list(`"b"`, 5000) + `}}}`,
			func(f *webhookFields) { f.Spec.DNSConfig = &DNSConfig{Searches: []string{"a"}} }},
		{"NameServers", `{"spec":{"dnsConfig":{"NameServers":["1"],"nameservers":["2"]}}}`,
			func(f *webhookFields) { f.Spec.DNSConfig = &DNSConfig{Nameservers: []string{"2"}} }},
		{"DNSConfig", `{"spec":{"DNSConfig":{"searches":["a"]}}}`, func(*webhookFields) {}},
		{"DNSPolicy", `{"spec":{"dnsPolicy":"None","DNSPolicy":"Default"}}`, func(f *webhookFields) { f.Spec.DNSPolicy = corev1.DNSNone }},
		{"Spec", `{"Spec":{"dnsPolicy":"None"}}`, func(*webhookFields) {}},
		{"Metadata", `{"Metadata":{"name":"a"}}`, func(*webhookFields) {}},
		{"Annotations", `{"metadata":{"Annotations":{"a":""}}}`, func(*webhookFields) {}},
		{"NodeSelector", `{"spec":{"nodeSelector":{"a":"1"},"NodeSelector":{"b":"2"}}}`,
			func(f *webhookFields) { f.Spec.NodeSelector = NodeSelector{"a": "1"} }},
		{"annotation keys differing in case", `{"metadata":{"annotations":{"a":"1","A":"2"}}}`,
			func(f *webhookFields) { f.Metadata.Annotations = Annotations{"a": "1", "A": "2"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got webhookFields
			if err := Unmarshal([]byte(tc.json), &got); err != nil {
				t.Fatal(err)
			}
			want := none
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

// TestRepeatedKeyMemory: the shape, a 6 MB dnsConfig of 2M empty
// options followed by an empty list under the same key (and its case
// variant), in a Pod and in a Deployment's template, is refused (or read
// as the empty list) while allocating a fraction of its bytes: the lists
// are counted in place and a template's path is not copied.
// encoding/json built all 2M options (253 MiB RSS in the webhook at
// 8c15235).
func TestRepeatedKeyMemory(t *testing.T) {
	for _, tc := range []struct {
		name, first, err string
		deployment       bool
	}{
		{"options twice", "options", "spec.dnsConfig.options: duplicate key", false},
		{"Options then options", "Options", "", false},
		{"options twice in a Deployment", "options", "Deployment spec.template: spec.dnsConfig.options: duplicate key", true},
		{"Options then options in a Deployment", "Options", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(`{"spec":{"dnsConfig":{"` + tc.first + `":` + list(`{}`, 2_000_000) + `,"options":[]}}}`)
			if tc.deployment {
				body = []byte(`{"metadata":{"name":"web"},"spec":{"replicas":1,"template":` + string(body) + `}}`)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			var c *DNSConfig
			var err error
			if tc.deployment {
				var tpls []Template
				if tpls, err = Templates("Deployment", body); err == nil {
					c = tpls[0].Fields.Spec.DNSConfig
				}
			} else {
				var f webhookFields
				err = Unmarshal(body, &f)
				c = f.Spec.DNSConfig
			}
			runtime.ReadMemStats(&after)
			if testkit.WantErr(t, err, tc.err) && len(c.Options) != 0 {
				t.Errorf("%d options read", len(c.Options))
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes: %d allocated (%.2f per byte)", len(body), alloc, float64(alloc)/float64(len(body)))
			if limit := uint64(len(body)) / 4; alloc > limit {
				t.Errorf("allocated %d bytes for %d, over %d", alloc, len(body), limit)
			}
		})
	}
}
