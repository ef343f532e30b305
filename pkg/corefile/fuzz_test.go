package corefile

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzRun: any Corefile either fails with an error or converts to a
// configuration serve accepts, with a finding for every directive.
func FuzzRun(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/Corefile")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add(".:53 {\n rewrite name regex (.*)\\.a {1}.b\n cache 10 {\n success 5 1 1\n }\n}\nx.example:5300 {\n forward . 10.0.0.1\n}\n")
	f.Fuzz(func(t *testing.T, text string) {
		if strings.Contains(text, "import") {
			t.Skip("imports read files")
		}
		r, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(text)}, nil)
		if err == nil {
			checkResult(t, r)
		}
	})
}

// checkResult fails t unless r, converted without an error, is a
// configuration serve accepts with complete findings.
func checkResult(t *testing.T, r Result) {
	t.Helper()
	if err := check(r.Config, func(string) string { return "Corefile:1" }); err != nil {
		t.Fatalf("converted without an error but invalid: %v", err)
	}
	for _, fd := range r.Findings {
		if fd.Where == "" || fd.Plugin == "" || fd.Status == "" {
			t.Fatalf("incomplete finding %+v", fd)
		}
	}
}

// FuzzImports (issue 55 rows 4 and 5): a Corefile and one imported file,
// both fuzzed, converted with the import directory of a ConfigMap. Beside
// the directory is a file whose content must never be read, and convert's
// environment holds a variable whose value must never appear: in the
// configuration, the findings or the error. It ends (no import cycle).
func FuzzImports(f *testing.F) {
	f.Add(".:53 {\n forward . 10.0.0.1\n}\nimport /etc/coredns/custom/*.server\n", "a.example {\n forward . 10.0.0.2\n}\n")
	f.Add(".:53 {\n forward . {$FUZZ_SECRET}\n}\n", "")
	f.Add(".:53 {\n import ../secret\n}\n", "import x.server\n")
	f.Add("(s) {\n forward . 10.0.0.1\n}\n.:53 {\n import s\n}\nimport *.server\n", "b.example {\n import s\n}\nimport *.server\n")
	f.Add(".:53 { import ../secret }\n", "")
	base := f.TempDir()
	if err := os.WriteFile(filepath.Join(base, "secret"), []byte("fuzz-secret-file\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	f.Setenv("FUZZ_SECRET", "fuzz-secret-env")
	n := 0
	f.Fuzz(func(t *testing.T, corefile, imported string) {
		n++
		dir := filepath.Join(base, "cm"+strconv.Itoa(n))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if err := os.WriteFile(filepath.Join(dir, "x.server"), []byte(imported), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(corefile), Imports: os.DirFS(dir)}, nil)
		var out strings.Builder
		if err != nil {
			out.WriteString(err.Error())
		}
		fmt.Fprintf(&out, "%+v", r.Config)
		for _, fd := range r.Findings {
			fmt.Fprintf(&out, "%+v", fd)
		}
		for _, secret := range []string{"fuzz-secret-file", "fuzz-secret-env"} {
			if strings.Contains(out.String(), secret) && !strings.Contains(corefile+imported, secret) {
				t.Fatalf("%q reached the output:\n%s", secret, out.String())
			}
		}
	})
}

// FuzzKubeDNS (issue 55): a kube-dns ConfigMap's stubDomains and
// upstreamNameservers, any JSON or not: either an error, or a
// configuration serve accepts, with complete findings.
func FuzzKubeDNS(f *testing.F) {
	f.Add(`{"acme.local": ["1.2.3.4"], "corp.example": ["10.0.0.53:5353", "fd00::53"]}`, `["8.8.8.8", "8.8.4.4"]`, "")
	f.Add(`{"": ["1.2.3.4"]}`, `[]`, "federations")
	f.Add(`{"cluster.local": ["10.0.0.1"]}`, `["not an ip"]`, "")
	f.Add(`{"a": null}`, `null`, "")
	f.Add(`[]`, `{}`, "")
	f.Fuzz(func(t *testing.T, stubs, upstreams, other string) {
		data := map[string]string{"stubDomains": stubs, "upstreamNameservers": upstreams}
		if other != "" {
			data[other] = "x"
		}
		if r, err := KubeDNS(data); err == nil {
			checkResult(t, r)
		}
	})
}
