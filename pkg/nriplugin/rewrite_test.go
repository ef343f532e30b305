package nriplugin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// Two configs of different lengths, as a live update writes them.
var (
	shortConf = []byte(Header("team", "web") + "nameserver 10.233.0.7\n")
	longConf  = []byte(Header("team", "web") + "search team.svc.cluster.local svc.cluster.local cluster.local host.test corp.test\n" +
		"nameserver 10.96.0.10\noptions ndots:5 timeout:2 attempts:3\n")
)

// TestWriteInPlace rewrites a file to a longer, a shorter and an equal
// content: the inode and mode stay, and the file holds exactly the new
// content (no tail of the old one).
func TestWriteInPlace(t *testing.T) {
	tests := []struct {
		name     string
		old, new []byte
	}{
		{"longer", shortConf, longConf},
		{"shorter", longConf, shortConf},
		{"same length", longConf, bytes.ToUpper(longConf)},
		{"to empty", shortConf, nil},
		{"from empty", nil, shortConf},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), fileName)
			if err := os.WriteFile(path, tt.old, 0o644); err != nil {
				t.Fatal(err)
			}
			ino := inode(t, path)
			if err := writeInPlace(path, tt.new); err != nil {
				t.Fatal(err)
			}
			checkFile(t, path, string(tt.new))
			if got := inode(t, path); got != ino {
				t.Errorf("inode %d, want %d", got, ino)
			}
			checkMode(t, path, 0o644)
		})
	}
}

// TestWriteInPlaceRefuses: a symbolic link or a directory where the pod
// file should be is an error naming the file, and what the link points
// at is left alone.
func TestWriteInPlaceRefuses(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, shortConf, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := writeInPlace(link, longConf); err == nil || !strings.Contains(err.Error(), `pod file: open `+link) {
		t.Errorf("writeInPlace through a symbolic link = %v, want a refusal naming it", err)
	}
	checkFile(t, target, string(shortConf))
	if err := writeInPlace(dir, longConf); err == nil {
		t.Error("writeInPlace on a directory succeeded")
	}
}

// TestWriteInPlaceConcurrentReader reads the file without pause while it
// is rewritten, alternately longer and shorter, 2000 times. No read may be
// empty, shorter than the shorter config or without the header line
// (truncating first, as the plugin did, gave empty reads). The test logs
// how the reads split: a config, a config padded with blank lines (or the
// NULs the kernel shows past a cut), or torn, a read that overlapped the
// one write (in place, a reader can see part of each; no order of writes
// avoids that, only a rename would, which a bind mount does not follow).
func TestWriteInPlaceConcurrentReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), fileName)
	if err := os.WriteFile(path, shortConf, 0o644); err != nil {
		t.Fatal(err)
	}
	rewrites := 2000
	if testing.Short() {
		rewrites = 200
	}
	var stop atomic.Bool
	var mu sync.Mutex
	counts := map[string]int{}
	var bad []string
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)-1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				got, err := os.ReadFile(path)
				kind := readKind(got)
				mu.Lock()
				counts[kind]++
				if (err != nil || len(got) < len(shortConf) || !bytes.HasPrefix(got, []byte(Header("team", "web")))) && len(bad) < 5 {
					bad = append(bad, fmt.Sprintf("%q (%v)", got, err))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range rewrites {
		data := longConf
		if i%2 == 1 {
			data = shortConf
		}
		if err := writeInPlace(path, data); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("reads while rewriting %d times: %v", rewrites, counts)
	for _, b := range bad {
		t.Errorf("a reader saw %s", b)
	}
	checkFile(t, path, string(shortConf))
}

// readKind sorts a read of a file being rewritten.
func readKind(got []byte) string {
	trimmed := bytes.TrimRight(got, "\n\x00")
	switch {
	case len(got) == 0:
		return "empty"
	case !bytes.Equal(trimmed, bytes.TrimRight(shortConf, "\n")) && !bytes.Equal(trimmed, bytes.TrimRight(longConf, "\n")):
		return "torn"
	case len(trimmed) < len(got)-1:
		return "padded"
	}
	return "config"
}

// TestWriteInPlaceFullDisk rewrites a file on a full file system (a
// tmpfs of two pages, in a mount namespace of the test's own): a longer
// config fails with ENOSPC and leaves the old one whole, where truncating
// first left an empty file; a shorter one, which needs no space, is
// written. It needs root (mount), else it is skipped.
func TestWriteInPlaceFullDisk(t *testing.T) {
	dir := t.TempDir()
	type result struct{ skip, err error }
	done := make(chan result, 1)
	go func() {
		// The thread is never unlocked: it ends with the goroutine and
		// takes its mount namespace along.
		runtime.LockOSThread()
		skip, err := fullDisk(t, dir)
		done <- result{skip, err}
	}()
	r := <-done
	if r.skip != nil {
		t.Skipf("no private tmpfs (needs root): %v", r.skip)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
}

// fullDisk is TestWriteInPlaceFullDisk on a locked thread: skip is why
// there is no tmpfs to test on.
func fullDisk(t *testing.T, dir string) (skip, err error) {
	if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare: %w", err), nil
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("mount --make-rprivate /: %w", err), nil
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=8k"); err != nil {
		return fmt.Errorf("mount tmpfs: %w", err), nil
	}
	path := filepath.Join(dir, fileName)
	if err := os.WriteFile(path, longConf, 0o644); err != nil {
		return nil, err
	}
	// Fill the rest: one page of the two.
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		return nil, err
	}
	for {
		if _, err := filler.Write(make([]byte, 512)); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				return nil, err
			}
			break
		}
	}
	filler.Close()
	huge := append(append([]byte{}, longConf...), bytes.Repeat([]byte("search a.test\n"), 400)...) // over a page
	err = writeInPlace(path, huge)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "pod file "+`"`+path+`": reserving`) {
		t.Errorf("writeInPlace of %d bytes on a full disk = %v, want ENOSPC naming the file", len(huge), err)
	}
	checkFile(t, path, string(longConf))
	if err := writeInPlace(path, shortConf); err != nil {
		t.Errorf("a shorter config on a full disk: %v", err)
	}
	checkFile(t, path, string(shortConf))
	return nil, nil
}
