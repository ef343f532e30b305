package attack

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// convert's bounds (issue 66 row 5): a ConfigMap of up to 10 MiB converts
// or is refused within 5 s, SIGTERM stops it within 1 s, and no run, even
// a killed one, leaves a file in its temporary directory.
const (
	convertBound = 5 * time.Second
	termBound    = time.Second
	maxConfigMap = 10 << 20
)

// convertLarge: `dnsconfigurer convert` on a coredns ConfigMap with many
// keys, run over and over; each run left alone, stopped by SIGTERM, or
// killed, at a random time.
type convertLarge struct {
	keys    int
	value   int // bytes of each key's value
	imports int // keys the Corefile imports
	stop    string
	after   time.Duration
}

func drawConvertLarge(r *rand.Rand) params {
	p := convertLarge{keys: between(r, 1000, 200_000), imports: between(r, 0, 20), stop: pick(r, "none", "none", "sigterm", "kill"),
		after: time.Duration(between(r, 50, 3000)) * time.Millisecond}
	p.value = between(r, 1, max(1, maxConfigMap/p.keys-24))
	return p
}

func (p convertLarge) String() string {
	s := fmt.Sprintf("%d keys of %d bytes (%d KiB), %d imported, ", p.keys, p.value, p.keys*(p.value+24)>>10, p.imports)
	if p.stop == "none" {
		return s + "left to finish"
	}
	return s + fmt.Sprintf("%s after %v", p.stop, p.after)
}

// configMap writes the ConfigMap of p into dir and returns its path.
func (p convertLarge) configMap(r *rand.Rand, dir string) (string, error) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coredns\n  namespace: kube-system\ndata:\n  Corefile: |\n    .:53 {\n        errors\n        forward . 10.0.0.2\n        cache 30\n")
	for i := range min(p.imports, p.keys) {
		fmt.Fprintf(&b, "        import k%06d.server\n", i)
	}
	b.WriteString("    }\n")
	for i := range p.keys {
		fmt.Fprintf(&b, "  k%06d.server: \"# %s\"\n", i, letters(r, p.value))
	}
	path := filepath.Join(dir, "coredns.yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

func (p convertLarge) run(ctx context.Context, e *env, a *attack) {
	dir, err := os.MkdirTemp("", "dnsconfigurer-attack-convert-")
	if err != nil {
		a.st.broken("temporary directory: %v", err)
		return
	}
	defer os.RemoveAll(dir)
	input, err := p.configMap(a.rand(0), dir)
	if err != nil {
		a.st.broken("write the ConfigMap: %v", err)
		return
	}
	for i := 0; ctx.Err() == nil; i++ {
		tmp := filepath.Join(dir, fmt.Sprintf("tmp%d", i))
		if err := os.Mkdir(tmp, 0o755); err != nil {
			a.st.broken("TMPDIR: %v", err)
			return
		}
		p.once(ctx, e.bin, input, tmp, a)
		if n := countFiles(tmp); n > 0 {
			a.st.broken("convert left %d files in its TMPDIR", n)
		}
		os.RemoveAll(tmp)
	}
}

// once runs convert on input with TMPDIR tmp and checks its bounds; the
// end of ctx is a SIGTERM, with its bound.
func (p convertLarge) once(ctx context.Context, bin, input, tmp string, a *attack) {
	cmd := exec.Command(bin, "convert", input)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		a.st.broken("start convert: %v", err)
		return
	}
	a.st.sent.Add(1)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopAt := time.NewTimer(p.after)
	if p.stop == "none" {
		stopAt.Stop()
	}
	bound := time.NewTimer(convertBound)
	defer stopAt.Stop()
	defer bound.Stop()
	var err error
	select {
	case err = <-exited:
		a.st.outcome(exitName(err))
		return
	case <-stopAt.C:
		if p.stop == "kill" {
			_ = cmd.Process.Kill()
			<-exited
			a.st.outcome("killed")
			return
		}
	case <-bound.C:
		a.st.broken("convert ran past %v", convertBound)
	case <-ctx.Done():
	}
	termed := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err = <-exited:
		a.st.outcome("SIGTERM, " + exitName(err))
	case <-time.After(termBound):
		a.st.broken("convert ran on %v after SIGTERM (started %v before)", termBound, termed.Sub(start).Round(time.Millisecond))
		_ = cmd.Process.Kill()
		<-exited
		a.st.outcome("killed after SIGTERM")
	}
}

// exitName names a run's end: "exit 0", "exit 3", "signal: terminated".
func exitName(err error) string {
	if err == nil {
		return "exit 0"
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.Exited() {
		return fmt.Sprintf("exit %d", ee.ExitCode())
	}
	return err.Error()
}

// countFiles is the number of entries under dir.
func countFiles(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if path != dir {
			n++
		}
		return nil
	})
	return n
}
