// Package validatestop runs `dnsconfigurer validate` (the binary built by
// test/buildbin) on the largest input it takes and checks that SIGTERM
// stops it within 2 s (issue 55 row 6: it exited 29 s after one).
//
//	go test -count=1 -v ./test/integration/validatestop/
package validatestop

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// writeLists writes files Lists of items Deployments each, every one with
// a finding, and returns their directory.
func writeLists(t *testing.T, files, items int) string {
	t.Helper()
	dir := t.TempDir()
	for f := range files {
		var b strings.Builder
		b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
		for i := range items {
			fmt.Fprintf(&b, "- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: app-%d-%d, namespace: default}\n"+
				"  spec:\n    selector: {matchLabels: {app: a}}\n    template:\n      metadata: {labels: {app: a}}\n"+
				"      spec:\n        dnsPolicy: None\n        dnsConfig: {nameservers: [10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4]}\n"+
				"        containers: [{name: c, image: x}]\n", f, i)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("list-%d.yaml", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestValidateStopsOnSIGTERM: 10,000 failing items (the object limit) in
// five Lists; validate gets SIGTERM 300 ms in and must exit within 2 s of
// it, non-zero, saying it stopped. The whole run takes longer than 300 ms,
// or the test fails as proving nothing.
func TestValidateStopsOnSIGTERM(t *testing.T) {
	dir := writeLists(t, 5, 2000)
	bin := buildbin.Dnsconfigurer(t)

	full := exec.Command(bin, "validate", "-f", dir)
	begin := time.Now()
	_ = full.Run()
	whole := time.Since(begin)
	t.Logf("a whole run: %v", whole.Round(time.Millisecond))

	cmd := exec.Command(bin, "validate", "-f", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(300 * time.Millisecond)
	defer timer.Stop()
	select {
	case err := <-done:
		t.Fatalf("validate ended (%v) before SIGTERM: the input is too small to show anything", err)
	case <-timer.C:
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	bound := time.NewTimer(2 * time.Second)
	defer bound.Stop()
	select {
	case err := <-done:
		took := time.Since(sent)
		t.Logf("exited %v after %v: %s", err, took.Round(time.Millisecond), strings.TrimSpace(stderr.String()))
		if err == nil {
			t.Error("exit 0 after SIGTERM, want a failure")
		}
		if !strings.Contains(stderr.String(), "stopped") && !strings.Contains(fmt.Sprint(err), "signal") {
			t.Errorf("stderr does not say it stopped: %s", stderr.String())
		}
	case <-bound.C:
		_ = cmd.Process.Kill()
		t.Fatal("validate still running 2 s after SIGTERM")
	}
}
