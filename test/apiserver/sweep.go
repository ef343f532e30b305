package apiserver

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// dirPattern names control plane directories under os.TempDir.
const dirPattern = "dnsconfigurer-apiserver-*"

// ownerFile holds the pid of the test binary that owns a directory.
const ownerFile = "owner.pid"

// sweepStale removes the directories of control planes whose test binary
// died without Close (a panic, a go test -timeout). Their processes died
// with the binary; only the files remain. Errors are ignored: this is
// housekeeping, and a directory in use always has a live owner.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPattern))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // being created, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid == os.Getpid() || alive(pid) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}
