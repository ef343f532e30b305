package convert

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/corefile"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// notForArgs are the plugins CoreDNS refuses alone for want of
// credentials (this machine has none), not of arguments. k8s_external,
// refused for want of a kubernetes plugin in the block, is compared:
// convert refuses it with CoreDNS's words.
var notForArgs = map[string]bool{"kubernetes": true, "route53": true, "clouddns": true}

// TestBarePlugins runs CoreDNS 1.15 on ". { PLUGIN }" for every plugin of
// its plugin.cfg, and convert on the same Corefile: convert refuses
// exactly what CoreDNS refuses, naming the line, the plugin and
// CoreDNS's reason (pkg/corefile's TestBareRefused holds the same table
// as recorded words).
func TestBarePlugins(t *testing.T) {
	bin := filepath.Join(os.Getenv(apiserver.EnvBinDir), "coredns")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no coredns in $%s: %v", apiserver.EnvBinDir, err)
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skipf("go env GOMODCACHE: %v", err)
	}
	cfg, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "github.com/coredns/coredns@v1.15.0/plugin.cfg"))
	if err != nil {
		t.Skipf("CoreDNS 1.15's plugin.cfg: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(cfg))
	n := 0
	for sc.Scan() {
		name, _, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "Corefile")
			var text, why string
			var refused bool
			for range 3 { // a port taken meanwhile by another test
				text = fmt.Sprintf(".:%d {\n    %s\n}\n", freePort(t), name)
				if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
				if why, refused = runCoreDNS(t, bin, path); !strings.Contains(why, "address already in use") {
					break
				}
			}
			_, err := corefile.Run(t.Context(), corefile.Input{Name: "Corefile", Text: []byte(text)}, nil)
			switch {
			case notForArgs[name]:
				t.Logf("CoreDNS: refused %v (%s); convert: %v", refused, why, err)
			case refused && err == nil:
				t.Errorf("CoreDNS refuses it (%s), convert accepts it", why)
			case refused && !strings.HasPrefix(err.Error(), "Corefile:2: "+name+": ") || refused && !strings.Contains(why, reason(err.Error())):
				t.Errorf("CoreDNS refuses it (%s), convert with another reason: %v", why, err)
			case !refused && err != nil:
				t.Errorf("CoreDNS runs it, convert refuses it: %v", err)
			}
		})
	}
	if n < 60 {
		t.Errorf("%d plugins in plugin.cfg", n)
	}
}

// reason is convert's refusal without its place, plugin and tail.
func reason(msg string) string {
	_, rest, _ := strings.Cut(msg, ": ")
	_, rest, _ = strings.Cut(rest, ": ")
	return strings.TrimSuffix(rest, " (CoreDNS refuses it too)")
}

// runCoreDNS starts CoreDNS on path with an empty environment: refused,
// with its words, when it exits before it says it serves.
func runCoreDNS(t *testing.T, bin, path string) (string, bool) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-conf", path)
	cmd.Dir, cmd.Env = filepath.Dir(path), []string{"PATH=/usr/bin:/bin", "HOME=" + filepath.Dir(path)}
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	started := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "CoreDNS-") {
				started <- true
				return
			}
		}
		started <- false
	}()
	ok := <-started
	cmd.Process.Kill()
	cmd.Wait()
	r.Close()
	return strings.TrimSpace(b.String()), !ok
}

// freePort is a port free for TCP and UDP on every address a moment ago.
func freePort(t *testing.T) int {
	for {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf(":%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
}
