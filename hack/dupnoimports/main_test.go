package main

import "testing"

func TestBlankImports(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"block", "package p\n\nimport (\n\t\"fmt\"\n\n\tx \"os\"\n)\n\nvar _ = fmt.Sprint\n", "package p\n\n\n\n\n\n\n\nvar _ = fmt.Sprint\n"},
		{"single", "package p\n\nimport \"fmt\"\n\nvar v = 1\n", "package p\n\n\n\nvar v = 1\n"},
		{"a paren in code", "package p\n\nfunc f() {\n\tg(\n\t)\n}\n", "package p\n\nfunc f() {\n\tg(\n\t)\n}\n"},
	} {
		if got := string(blankImports([]byte(tc.in))); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
