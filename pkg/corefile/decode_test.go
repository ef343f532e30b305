package corefile

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	yamlv2 "go.yaml.in/yaml/v2"
)

// decodeCases are documents whose reading the fast path must not change:
// each shape where go.yaml's ordered slices, a map and encoding/json part.
var decodeCases = []string{
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coredns\n  namespace: kube-system\ndata:\n  Corefile: |\n    .:53 {\n    }\n  a.server: x\n",
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"coredns"},"data":{"Corefile":".:53 {\n}\n"}}`,
	"data:\n  Corefile: |\n    .:53 {\n    }\n",
	"kind: ConfigMap\ndata:\n  a: 1\n",
	"kind: ConfigMap\ndata:\n  a: yes\n  b: on\n",
	"kind: ConfigMap\ndata:\n  a: ~\n",
	"kind: ConfigMap\ndata:\n  a: 1.5\n",
	"kind: ConfigMap\ndata:\n  a: .inf\n",
	"kind: ConfigMap\ndata:\n  1: x\n  true: y\n",
	"kind: ConfigMap\ndata:\n  a: x\n  a: y\n",
	"kind: ConfigMap\ndata: {a: x}\ndata: {b: y}\n",
	"kind: ConfigMap\nKind: List\ndata:\n  a: x\n",
	"kind: ConfigMap\nDATA:\n  a: x\n",
	"kind: ConfigMap\nmetadata:\n  NAME: x\n",
	"kind: ConfigMap\nmetadata: x\n",
	"kind: ConfigMap\nmetadata:\n  name: [a]\n",
	"kind: 5\n",
	"kind: null\ndata: null\n",
	"kind: ConfigMap\nitems: 5\n",
	"kind: ConfigMap\nitems: [1, 2]\n",
	"base: &b {x: y}\nkind: ConfigMap\ndata:\n  <<: *b\n  a: z\n",
	"kind: ConfigMap\ndata: &d\n  a: x\nother: *d\n",
	"kind: ConfigMap\ndata:\n  a: !!binary aGVsbG8=\n",
	"kind: ConfigMap\ndata:\n  a: !!binary /w==\n",
	"kind: ConfigMap\ndata:\n  a: \"\\xff\\u00e9\"\n",
	"kind: ConfigMap\ndata:\n  a: 2001-12-14\n",
	"kind: ConfigMap\nextra:\n  ? [a, b]\n  : c\n",
	"kind: ConfigMap\nextra: {x: 1.5, y: [.nan]}\n",
	"kind: ConfigMap\nimmutable: true\nmetadata:\n  resourceVersion: \"12\"\n  managedFields:\n  - fieldsV1: {f:data: {.: {}}}\n",
	"apiVersion: v1\nkind: List\nitems:\n- kind: ConfigMap\n  metadata: {name: coredns}\n  data: {Corefile: x}\n- null\n- kind: ConfigMap\n  data: {a: b}\n",
	"kind: List\nitems:\n- 5\n",
	"kind: List\nitems:\n- kind: ConfigMap\n  items: 3\n",
	"kind: List\nitems:\n- kind: ConfigMap\n  data: {a: 1}\n",
	"kind: ConfigMapList\nitems: []\n",
	"kind: List\n",
	"# only a comment\n",
	"",
	"null\n",
	".:53 {\n  forward . 10.0.0.1\n}\n",
	"- a\n- b\n",
	"kind: [\n",
	"a: b\n",
	"apiVersion: 3\n",
}

// TestDecodeAgrees: on every case and every example of testdata, the fast
// path reads what the exact one reads, errors included; and it is the path
// taken for the ConfigMaps operators have.
func TestDecodeAgrees(t *testing.T) {
	for i, d := range decodeCases {
		t.Run(fmt.Sprint(i), func(t *testing.T) { agree(t, []byte(d)) })
	}
	inputs, _ := filepath.Glob("testdata/*/configmap.yaml")
	if len(inputs) == 0 {
		t.Fatal("no example ConfigMaps")
	}
	for _, in := range inputs {
		b, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		agree(t, b)
		var ms yamlv2.MapSlice
		if err := yamlv2.Unmarshal(b, &ms); err != nil {
			t.Fatal(err)
		}
		if _, ok := fastDoc(ms); !ok {
			t.Errorf("%s: not read by the fast path", in)
		}
	}
}

// agree fails t unless decodeDoc and exactDoc read d alike.
func agree(t *testing.T, d []byte) {
	t.Helper()
	got, gotErr := decodeDoc(d)
	want, wantErr := exactDoc(d)
	if !sameError(gotErr, wantErr) || !sameError(got.err, want.err) {
		t.Fatalf("%q: errors %v / %v, want %v / %v", d, gotErr, got.err, wantErr, want.err)
	}
	got.err, want.err = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%q:\n got %+v\nwant %+v", d, got, want)
	}
}

// TestDecodeAgreesGenerated: documents made of the pieces where the paths
// could part (the object's fields in other cases, scalars of every YAML
// 1.1 type, keys twice, nesting, Lists) are read alike.
func TestDecodeAgreesGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(66, 5))
	keys := []string{"kind", "Kind", "apiVersion", "metadata", "data", "DATA", "items", "name", "namespace", "NAME", "x", "1", "true", "~", "<<"}
	scalars := []string{"ConfigMap", "List", "ConfigMapList", "v1", "coredns", "1", "0x1f", "1_000", "1.5", ".inf", "yes", "off", "null", "~", "''",
		`"a\tb"`, "2001-12-14", "!!binary aGk=", "!!str 5", "*a", "|\n    block\n", "[]", "{}"}
	var gen func(depth int) string
	gen = func(depth int) string {
		switch n := rng.IntN(10); {
		case depth > 2 || n < 5:
			return scalars[rng.IntN(len(scalars))]
		case n < 7:
			var b strings.Builder
			b.WriteString("[")
			for i := range rng.IntN(3) {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(gen(depth + 1))
			}
			return b.String() + "]"
		default:
			var b strings.Builder
			b.WriteString("{")
			for i := range rng.IntN(4) {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(keys[rng.IntN(len(keys))] + ": " + gen(depth+1))
			}
			return b.String() + "}"
		}
	}
	for range 3000 {
		var doc strings.Builder
		if rng.IntN(4) == 0 {
			doc.WriteString("anchor: &a {name: x, data: {k: v}}\n")
		}
		for range 1 + rng.IntN(5) {
			doc.WriteString(keys[rng.IntN(len(keys))] + ": " + gen(0) + "\n")
		}
		agree(t, []byte(doc.String()))
	}
}

// sameError: both nil, or the same message. sigs.k8s.io/yaml names the
// first bad key of a map in Go's random order, so two of its conversion
// errors of one document may name different keys.
func sameError(a, b error) bool {
	const converting = "error converting YAML to JSON: "
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error() || strings.HasPrefix(a.Error(), converting) && strings.HasPrefix(b.Error(), converting)
}

// FuzzDecode: any document is read by decodeDoc as by exactDoc.
func FuzzDecode(f *testing.F) {
	for _, d := range decodeCases {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, d string) {
		if len(d) > 4096 {
			t.Skip()
		}
		agree(t, []byte(d))
	})
}

// BenchmarkDecode reads a 10 MiB ConfigMap of 455,000 small keys by each
// path (decodeDoc's comment quotes the figures).
func BenchmarkDecode(b *testing.B) {
	var doc strings.Builder
	doc.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coredns\ndata:\n  Corefile: |\n    .:53 {\n    }\n")
	for i := 0; doc.Len() < 10<<20; i++ {
		fmt.Fprintf(&doc, "  k%06d.txt: v%06d\n", i, i)
	}
	d := []byte(doc.String())
	for _, path := range []struct {
		name string
		read func([]byte) (decoded, error)
	}{{"fast", decodeDoc}, {"exact", exactDoc}} {
		b.Run(path.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := path.read(d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
