package startcheck

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// TestRun: a configuration naming the pod's files starts, with the files
// stood in; one Validate refuses does not; a stopped context is stopped.
func TestRun(t *testing.T) {
	ok := v1alpha1.ServerConfiguration{Listen: []string{"127.0.0.1:53"}, Objects: "/nonexistent/objects",
		Forward: []v1alpha1.ForwardRoute{{Zone: ".", Upstreams: []string{"/etc/pod/resolv.conf"}},
			{Zone: "corp.example", Upstreams: []string{"/etc/pod/resolv.conf"}}},
		Hosts: v1alpha1.HostsFile{File: "/etc/pod/hosts"}}
	if err, stopped := Run(context.Background(), ok); err != nil || stopped != nil {
		t.Errorf("Run = %v, %v; want nil, nil", err, stopped)
	}
	bad := ok
	bad.Mode = "nosuch"
	if err, stopped := Run(context.Background(), bad); err == nil || stopped != nil {
		t.Errorf("mode nosuch: Run = %v, %v; want an error, nil", err, stopped)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("SIGTERM")
	cancel(cause)
	if _, stopped := Run(ctx, ok); stopped != cause {
		t.Errorf("stopped: %v, want %v", stopped, cause)
	}
}

// TestStandIns: one stand-in a path, holding its content; none after
// close, and a temporary directory gone with it.
func TestStandIns(t *testing.T) {
	s := &standIns{}
	a, err := s.file("/etc/a", "nameserver 127.0.0.1\n")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s.file("/etc/a", "other"); again != a {
		t.Errorf("second stand-in of /etc/a: %q, want %q", again, a)
	}
	if b, _ := os.ReadFile(a); string(b) != "nameserver 127.0.0.1\n" {
		t.Errorf("stand-in holds %q", b)
	}
	dir := s.dir
	s.close()
	if _, err := s.file("/etc/b", ""); err == nil {
		t.Error("a stand-in after close")
	}
	if dir != "" {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("temporary directory %s left: %v", dir, err)
		}
	}
}
