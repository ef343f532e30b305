// Package buildbin builds the dnsconfigurer binary once per test process for
// the tests that run it as users do (e2e, deploy, integration).
//
//	func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }
//	...
//	bin := buildbin.Dnsconfigurer(t)
package buildbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Package is the import path of the command.
const Package = "github.com/dnsconfigurer/dnsconfigurer/cmd/dnsconfigurer"

var (
	once sync.Once
	dir  string
	path string
	err  error
)

// Dnsconfigurer returns the path of the binary built from the working tree,
// building it on first use. It skips t in -short mode or without a go
// command, and fails t when the build fails.
func Dnsconfigurer(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds dnsconfigurer: skipped in -short mode")
	}
	goBin, lookErr := exec.LookPath("go")
	if lookErr != nil {
		t.Skipf("no go command to build dnsconfigurer: %v", lookErr)
	}
	once.Do(func() {
		if dir, err = os.MkdirTemp("", "dnsconfigurer-bin-"); err != nil {
			return
		}
		path = filepath.Join(dir, "dnsconfigurer")
		// Static, as the image ships it (test/cluster runs it in a
		// container too).
		cmd := exec.Command(goBin, "build", "-o", path, Package)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, buildErr := cmd.CombinedOutput(); buildErr != nil {
			err = fmt.Errorf("go build %s: %v\n%s", Package, buildErr, out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// Main runs the tests and removes the binary afterwards; use it as the body
// of TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	Remove()
	return code
}

// Remove deletes the binary, for a TestMain that runs the tests otherwise
// (apiserver.RunTests) and then calls it.
func Remove() {
	if dir != "" {
		os.RemoveAll(dir)
	}
}

// Terminate stops a process as kubelet does: SIGTERM, then SIGKILL if it
// has not exited (exited closed) within grace. It reports whether it had
// to kill.
func Terminate(p *os.Process, exited <-chan struct{}, grace time.Duration) (killed bool) {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return false
	case <-time.After(grace):
		_ = p.Kill()
		<-exited
		return true
	}
}
