package containerd

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// RuntimeEnv names a directory holding containerd 2.x's containerd,
// containerd-shim-runc-v2 and ctr (test/e2e/containerd2.sh builds them from
// the Go module proxy and prints the directory). When it is set, every
// harness of the test process runs that containerd instead of the one on
// PATH (Debian's 1.6), unless Options.Runtime says otherwise: CI runs the
// containerd e2e packages once without it and once with it.
const RuntimeEnv = "DNSCONFIGURER_CONTAINERD_BIN"

// Runtime is the containerd a harness runs.
type Runtime struct {
	// BinDir holds containerd, containerd-shim-runc-v2 and ctr; "" means
	// the ones on PATH.
	BinDir string
}

// DefaultRuntime is $DNSCONFIGURER_CONTAINERD_BIN's containerd, else PATH's.
func DefaultRuntime() Runtime { return Runtime{BinDir: os.Getenv(RuntimeEnv)} }

// bin is the path of one of the runtime's binaries.
func (r Runtime) bin(name string) string {
	if r.BinDir == "" {
		return name
	}
	return filepath.Join(r.BinDir, name)
}

// env is the environment containerd runs with: BinDir first on PATH, where
// containerd looks for containerd-shim-runc-v2.
func (r Runtime) env() []string {
	env := os.Environ()
	if r.BinDir != "" {
		env = append(env, "PATH="+r.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	return env
}

var containerdVersion = regexp.MustCompile(`\bv?(\d+)\.(\d+)\.(\d+)`)

// majorVersion reads the major version from `containerd --version`
// ("containerd github.com/containerd/containerd/v2 v2.4.2 <rev>", Debian's
// "containerd containerd.io 1.6.20~ds1 ...").
func majorVersion(version string) (int, error) {
	m := containerdVersion.FindStringSubmatch(version)
	if m == nil {
		return 0, fmt.Errorf("no version in %q", version)
	}
	return strconv.Atoi(m[1])
}
