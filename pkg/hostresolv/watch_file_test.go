package hostresolv

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// TestWatchWriteThroughAnotherPath: the file is written in place through a
// path in another directory, as the node writes its /etc/resolv.conf while
// a container sees it bind-mounted at its own /etc/resolv.conf. A hard link
// in another directory is the same inode reached by another dentry, like
// the mount. The change is published from the file's own watch, without a
// resync (start disables it).
func TestWatchWriteThroughAnotherPath(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	testkit.WriteFile(t, path, "nameserver 10.0.0.1\n")
	node := filepath.Join(other, "node-resolv.conf")
	if err := os.Link(path, node); err != nil {
		t.Skipf("hard link: %v", err)
	}
	_, ch := start(t, path)
	if got := ns(next(t, ch)); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Fatalf("first snapshot %v", got)
	}
	for i, want := range []string{"10.0.0.2", "10.0.0.3"} {
		testkit.WriteFile(t, node, "nameserver "+want+"\n")
		if got := ns(next(t, ch)); !slices.Equal(got, []string{want}) {
			t.Fatalf("write %d through %s: snapshot %v, want [%s]", i, node, got, want)
		}
	}
	// A rename over the watched path makes it a new inode: the write
	// through the old link no longer concerns it, a write to the new file
	// is still seen.
	testkit.WriteAtomic(t, path, "nameserver 10.0.0.4\n")
	if got := ns(next(t, ch)); !slices.Equal(got, []string{"10.0.0.4"}) {
		t.Fatalf("after the rename: %v", got)
	}
	testkit.WriteFile(t, path, "nameserver 10.0.0.5\n")
	if got := ns(next(t, ch)); !slices.Equal(got, []string{"10.0.0.5"}) {
		t.Fatalf("in place after the rename: %v", got)
	}
}

// TestSnapshotLines: a snapshot says where in the file each part was read
// (podfacts.HostOf carries it to the engine's trace).
func TestSnapshotLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	testkit.WriteFile(t, path, "# node\nnameserver 10.0.0.1\nsearch a.example\nnameserver 10.0.0.2\noptions ndots:2\n")
	_, ch := start(t, path)
	s := next(t, ch)
	want := resolvconf.Lines{Nameservers: []int{2, 4}, Search: 3, Options: []int{5}}
	if !reflect.DeepEqual(s.Lines, want) {
		t.Errorf("snapshot lines %+v, want %+v", s.Lines, want)
	}
	testkit.WriteFile(t, path, "nameserver 10.0.0.3\n")
	if s := next(t, ch); !reflect.DeepEqual(s.Lines, resolvconf.Lines{Nameservers: []int{1}}) {
		t.Errorf("after the rewrite: lines %+v", s.Lines)
	}
}
