package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHostresolvWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	os.WriteFile(path, []byte("nameserver 192.0.2.1\nnameserver 127.0.0.53\n"), 0o644)

	code, out, _ := run(t, "", "hostresolv", "--resolv-conf", path)
	var once snapshotJSON
	if err := json.Unmarshal([]byte(out), &once); code != 0 || err != nil || strings.Join(once.Nameservers, ",") != "192.0.2.1" || once.DroppedLoopback[0] != "127.0.0.53" {
		t.Fatalf("exit %d, %q", code, out)
	}

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() {
		done <- dispatch(ctx, []string{"hostresolv", "--resolv-conf", path, "--watch"}, nil, pw, io.Discard)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	read := func() snapshotJSON {
		t.Helper()
		got := make(chan snapshotJSON, 1)
		go func() {
			var s snapshotJSON
			if lines.Scan() {
				json.Unmarshal(lines.Bytes(), &s)
			}
			got <- s
		}()
		select {
		case s := <-got:
			return s
		case <-time.After(5 * time.Second):
			t.Fatal("no line")
		}
		return snapshotJSON{}
	}
	if s := read(); s.Generation != 1 {
		t.Fatalf("first line %+v", s)
	}
	tmp := path + ".tmp"
	os.WriteFile(tmp, []byte("nameserver 192.0.2.2\n"), 0o644)
	os.Rename(tmp, path)
	if s := read(); s.Generation != 2 || s.Nameservers[0] != "192.0.2.2" {
		t.Fatalf("change line %+v", s)
	}
	os.Remove(path)
	if s := read(); s.Generation != 3 || s.Problem == "" || s.Nameservers[0] != "192.0.2.2" || s.Error != "" {
		t.Fatalf("problem line %+v", s)
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if code := <-done; code != 0 {
		t.Fatalf("exit %d after cancel", code)
	}
}
