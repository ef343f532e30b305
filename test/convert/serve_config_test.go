package convert_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// TestServeGivenCorpus: `serve --config` given a corpus input (a
// Corefile or a DNS ConfigMap, as operators have them) exits 2 saying
// what the file is and which convert command to run; that command's
// output then loads as serve's config, where convert takes the input.
// shim, which loads its file the same way, says what the file is.
func TestServeGivenCorpus(t *testing.T) {
	bin := buildbin.Dnsconfigurer(t)
	run := func(args ...string) (int, string, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return exitCode(cmd.Run()), stdout.String(), stderr.String()
	}
	for _, c := range corpusCases(t) {
		if c.input == "custom.yaml" {
			continue // a coredns-custom ConfigMap alone, which convert refuses
		}
		t.Run(c.name, func(t *testing.T) {
			input := filepath.Join(c.dir, c.input)
			code, _, stderr := run("serve", "--config", input)
			what := "a Corefile (a CoreDNS configuration)"
			if c.input != "Corefile" {
				what = "ConfigMap"
			}
			for _, want := range []string{"dnsconfigurer serve: --config " + input + ": this is ", what, "not a ServerConfiguration: run `dnsconfigurer convert " + input + " > config.yaml` first"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("serve --config %s: stderr %q, want %q", input, stderr, want)
				}
			}
			if code != 2 {
				t.Errorf("serve --config %s: exit %d, want 2", input, code)
			}
			code, out, stderr := run("convert", input)
			if code != 0 && code != 3 {
				t.Logf("convert refuses it (exit %d): %s", code, strings.TrimSpace(stderr))
				return
			}
			config := filepath.Join(t.TempDir(), "config.yaml")
			write(t, config, out)
			if err := flaglayer.ReadFile(config, v1alpha1.ServerKind, &v1alpha1.ServerConfiguration{}); err != nil {
				t.Errorf("convert %s > config.yaml: serve's loader: %v", input, err)
			}
		})
	}
	input := filepath.Join(corpusDir, "06-terraform-forward-policy", "Corefile")
	code, _, stderr := run("shim", "--config", input)
	if want := "this is a Corefile (a CoreDNS configuration), not a ShimConfiguration"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("shim --config %s: exit %d, stderr %q; want 2 and %q", input, code, stderr, want)
	}
}
