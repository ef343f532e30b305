package podspec

import (
	"encoding/json"
	"strings"
	"testing"
)

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
	list := func(elem string, n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + "]"
	}
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
			var f struct {
				Fields
				Spec struct {
					Spec
					NodeSelector NodeSelector `json:"nodeSelector"`
				} `json:"spec"`
			}
			err := json.Unmarshal([]byte(tc.json), &f)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "" && (err == nil || err.Error() != tc.err):
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}
