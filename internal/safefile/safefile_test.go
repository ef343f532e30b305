package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadAtMostGrowing(t *testing.T) {
	// A file that grows after its size was taken is still cut at the limit.
	_, err := ReadAtMost(strings.NewReader(strings.Repeat("x", 1000)), 100, 10)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("err = %v, want ErrTooLarge", err)
	}
	got, err := ReadAtMost(strings.NewReader("nameserver 10.0.0.1\n"), 100, 5)
	if err != nil || string(got) != "nameserver 10.0.0.1\n" {
		t.Errorf("got %q, %v", got, err)
	}
}

// TestRead: regular files within the limit are read; over it by size,
// FIFOs and directories are refused without blocking, naming the file.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	big := filepath.Join(dir, "big")
	fifo := filepath.Join(dir, "fifo")
	if err := os.WriteFile(small, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, 2000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want error
	}{{small, nil}, {big, ErrTooLarge}, {fifo, ErrNotRegular}, {dir, ErrNotRegular}} {
		data, fi, err := Read(tc.path, 1000)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.path, err, tc.want)
		}
		if tc.want != nil && !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: %v does not name the file", tc.path, err)
		}
		if tc.want == nil && (string(data) != "hello" || fi.Size() != 5) {
			t.Errorf("%s: %q %v", tc.path, data, fi)
		}
	}
}

// TestReadNamed: a file at the limit is read whole, one byte more is
// refused naming the file, a missing one fails.
func TestReadNamed(t *testing.T) {
	dir := t.TempDir()
	at, over := filepath.Join(dir, "at"), filepath.Join(dir, "over")
	if err := os.WriteFile(at, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(over, []byte("0123456789a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadNamed(at, 10); err != nil || string(got) != "0123456789" {
		t.Errorf("at the limit: %q, %v", got, err)
	}
	if _, err := ReadNamed(over, 10); err == nil || err.Error() != over+": larger than 10 bytes" {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := ReadNamed(filepath.Join(dir, "missing"), 10); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v, want ErrNotExist", err)
	}
}
