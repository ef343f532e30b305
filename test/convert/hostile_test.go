package convert_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// TestHostileInputs (issue 55 rows 4 and 5) runs `dnsconfigurer convert`
// on ConfigMaps and Corefiles that reach outside them: a key importing
// itself is refused within a second (on 66f333f this one took 4.7 s to
// reach caddy's import depth of 10,000; the larger key took 1.5 GB
// in 35 s), {$VAR}
// is refused and the value of the variable in convert's environment never
// reaches stdout or stderr, and an import of a file outside the Corefile's
// directory is not read.
func TestHostileInputs(t *testing.T) {
	bin := buildbin.Dnsconfigurer(t)
	outside := t.TempDir()
	secretFile := filepath.Join(outside, "token")
	write(t, secretFile, "secret-from-a-file\n")
	dir := t.TempDir()
	selfImport := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coredns\n  namespace: kube-system\ndata:\n" +
		"  Corefile: |\n    .:53 {\n        forward . 10.0.0.1\n        cache 30\n    }\n    import /etc/coredns/custom/*.server\n" +
		"  loop.server: |\n    loop.example:53 {\n        forward . 10.0.0.2\n    }\n    import *.server\n" +
		strings.Repeat("  # padding to the issue's 1.7 KB\n", 40)
	for _, tc := range []struct {
		name, file, text string
		exit             int
		stderr           string
	}{
		{"a key importing itself", "cm.yaml", selfImport, 1, "loop.server:4: import in an imported file"},
		{"{$VAR}", "Corefile", ".:53 {\n    forward . {$UPSTREAM_TOKEN}\n}\n", 1, "{$UPSTREAM_TOKEN}: convert does not read environment variables"},
		// Exit 3: converted with a finding dropped.
		{"import outside", "Corefile", ".:53 {\n    forward . 10.0.0.1\n}\nimport " + secretFile + "\n", 3, "token: outside " + dir + ", not read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := filepath.Join(dir, tc.file)
			write(t, in, tc.text)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "convert", in)
			cmd.Env = append(os.Environ(), "UPSTREAM_TOKEN=secret-from-the-env")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			begin := time.Now()
			err := cmd.Run()
			took := time.Since(begin)
			t.Logf("exit %d after %v; stderr: %s", exitCode(err), took.Round(time.Millisecond), strings.TrimSpace(stderr.String()))
			if code := exitCode(err); code != tc.exit {
				t.Errorf("exit %d, want %d", code, tc.exit)
			}
			if took > time.Second {
				t.Errorf("took %v, want under a second", took)
			}
			if tc.stderr != "" && !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr does not say %q", tc.stderr)
			}
			for _, secret := range []string{"secret-from-the-env", "secret-from-a-file"} {
				if strings.Contains(stdout.String()+stderr.String(), secret) {
					t.Errorf("%q reached the output:\n%s\n%s", secret, stdout.String(), stderr.String())
				}
			}
		})
	}
}
