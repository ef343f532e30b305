package gendeploy

import (
	"strings"
	"testing"
)

func TestDropAnnotation(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		wantErr        bool
	}{
		{
			name: "only annotation: the map goes",
			in:   "kind: DaemonSet\nspec:\n  template:\n    metadata:\n      annotations:\n        k/a: x\n      labels:\n        a: b\n",
			want: "kind: DaemonSet\nspec:\n  template:\n    metadata:\n      labels:\n        a: b\n",
		},
		{
			name: "one of two",
			in:   "metadata:\n  annotations:\n    k/a: keep\n    p/b: \"1\"\n  name: x\n",
			want: "metadata:\n  annotations:\n    p/b: \"1\"\n  name: x\n",
		},
		{
			name: "not first, after a comment",
			in:   "metadata:\n  annotations:\n    # why\n    a/b: \"1\"\n    k/a: x\n  name: x\n",
			want: "metadata:\n  annotations:\n    # why\n    a/b: \"1\"\n  name: x\n",
		},
		{
			name: "absent",
			in:   "metadata:\n  name: x\n",
			want: "metadata:\n  name: x\n",
		},
		{
			name:    "not in an annotations map",
			in:      "data:\n  k/a: x\n",
			wantErr: true,
		},
		{
			name:    "a block value",
			in:      "metadata:\n  annotations:\n    k/a: |\n      x\n",
			wantErr: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dropAnnotation(tc.in, "k/a")
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %t", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestFirstDiff(t *testing.T) {
	for _, tc := range []struct {
		have, want string
		line       int
	}{
		{"a\nb\nc\n", "a\nB\nc\n", 2},
		{"a\nb\n", "a\nb\nc\n", 3},
		{"a\nb\nc\n", "a\n", 2},
	} {
		d := firstDiff(tc.have, tc.want)
		if d.Line != tc.line {
			t.Errorf("firstDiff(%q, %q) = line %d, want %d", tc.have, tc.want, d.Line, tc.line)
		}
	}
}

func TestObjects(t *testing.T) {
	out := "---\n# Source: c/templates/a.yaml\n# About a.\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n" +
		"---\n# Source: c/templates/tests/t.yaml\napiVersion: v1\nkind: Pod\nmetadata:\n  name: t\n  annotations:\n    helm.sh/hook: test\n" +
		"---\n# Source: c/templates/s.yaml\napiVersion: v1\nkind: Service\nmetadata:\n  annotations:\n    helm.sh/resource-policy: keep\n  name: s\n"
	docs, err := objects([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ConfigMap/a": "# About a.\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		"Service/s":   "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n",
	}
	if len(docs) != len(want) {
		t.Errorf("%d documents, want %d: %v", len(docs), len(want), docs)
	}
	for k, w := range want {
		if docs[k] != w {
			t.Errorf("%s:\n%s\nwant\n%s", k, docs[k], w)
		}
	}
}

func TestHeader(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(Header, "\n"), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "DO NOT EDIT.") || !strings.Contains(lines[1], Command) {
		t.Errorf("Header %q: want two lines, the first ending in DO NOT EDIT., the second naming %s", Header, Command)
	}
}
