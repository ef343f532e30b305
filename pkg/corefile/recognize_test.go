package corefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecognize: every input of test/convert/corpus is recognized as the
// form its SOURCE names, and no dnsconfigurer file or broken text is.
func TestRecognize(t *testing.T) {
	forms := map[string]Form{
		"corefile": FormCorefile, "configmap": FormCoreDNS, "manifest": FormCoreDNS, "fragment": FormCoreDNS,
		"nodelocal": FormNodeLocal, "kubedns": FormKubeDNS,
		// A coredns-custom ConfigMap alone: convert refuses it.
		"custom-alone": "",
	}
	dirs, _ := filepath.Glob("../../test/convert/corpus/*/SOURCE")
	if len(dirs) < 40 {
		t.Fatalf("%d corpus entries, want at least 40", len(dirs))
	}
	for _, src := range dirs {
		dir := filepath.Dir(src)
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(string(b), "\nform: ")
		form, _, _ := strings.Cut(rest, "\n")
		want, ok := forms[form]
		if !ok {
			t.Fatalf("%s: form %q", src, form)
		}
		var input string
		for _, n := range []string{"Corefile", "configmap.yaml", "manifest.yaml", "fragment.yaml", "kubedns.yaml", "custom.yaml"} {
			if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
				input = filepath.Join(dir, n)
				break
			}
		}
		text, err := os.ReadFile(input)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if got := Recognize(t.Context(), input, text); got != want {
			t.Errorf("%s: Recognize = %q, want %q", input, got, want)
		}
	}
	configs, _ := filepath.Glob("testdata/*/config*.golden.yaml")
	configs = append(configs, "../../api/v1alpha1/testdata/server-full.yaml", "../../charts/dnsconfigurer/files/dns.yaml")
	for _, f := range configs {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := Recognize(t.Context(), f, text); got != "" {
			t.Errorf("%s: Recognize = %q, want none", f, got)
		}
	}
	for _, text := range []string{
		"garbage", "[1, 2]", "{}", "{\n  \"apiVersion\": \"dnsconfigurer.io/v1alpha1\",\n  \"kind\": \"ServerConfiguration\",\n}",
		"apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\nlisten: [\":53\"\n",
		"apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\ncache: {\n  maxTTL: 30s\n",
		"listen:\n- :53\n\tpods: verified\n",
	} {
		if got := Recognize(t.Context(), "config.yaml", []byte(text)); got != "" {
			t.Errorf("%q: Recognize = %q, want none", text, got)
		}
	}
}
