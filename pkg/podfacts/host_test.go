package podfacts

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// TestHostOf: the engine gets the file as kubelet reads it, loopback
// included, and an unusable file fails it naming the path.
func TestHostOf(t *testing.T) {
	bad := errors.New("broken")
	raw := resolvconf.Config{Nameservers: []string{"127.0.0.53", "1.2.3.4"}, Searches: []string{"a"}, Options: []string{"x"}}
	tests := []struct {
		name    string
		in      hostresolv.Snapshot
		want    policy.Host
		wantErr string // Err's text; Err must wrap bad
	}{
		{"the file as kubelet reads it, loopback included", hostresolv.Snapshot{Raw: raw, Config: resolvconf.Config{Nameservers: []string{"1.2.3.4"}}},
			policy.Host{Nameservers: raw.Nameservers, Searches: raw.Searches, Options: raw.Options}, ""},
		{"disabled", hostresolv.Snapshot{Disabled: true}, policy.Host{Disabled: true}, ""},
		{"where each part was read", hostresolv.Snapshot{Raw: resolvconf.Config{Nameservers: []string{"1.2.3.4"}}, Lines: resolvconf.Lines{Nameservers: []int{2}}},
			policy.Host{Nameservers: []string{"1.2.3.4"}, Lines: resolvconf.Lines{Nameservers: []int{2}}}, ""},
		{"last good with a problem", hostresolv.Snapshot{Raw: resolvconf.Config{Nameservers: []string{"1.2.3.4"}}, Problem: bad},
			policy.Host{Nameservers: []string{"1.2.3.4"}}, ""},
		{"unusable, named by its path", hostresolv.Snapshot{Path: "/r", Raw: raw, Err: bad}, policy.Host{}, "/r: broken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HostOf(tt.in)
			if tt.wantErr != "" && (!errors.Is(got.Err, bad) || got.Err.Error() != tt.wantErr) {
				t.Errorf("Err = %v, want %q wrapping %v", got.Err, tt.wantErr, bad)
			}
			got.Err = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("HostOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestReadHost: the file as kubelet reads it, with its lines; "" switches
// it off; on Windows only a file will do, and "Host" says why.
func TestReadHost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte("# node\nnameserver 10.0.0.2\nsearch corp.example.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, nodeOS := range []string{"linux", "windows"} {
		got := ReadHost(path, nodeOS)
		if got.Err != nil || !reflect.DeepEqual(got.Nameservers, []string{"10.0.0.2"}) || !reflect.DeepEqual(got.Searches, []string{"corp.example"}) ||
			!reflect.DeepEqual(got.Lines.Nameservers, []int{2}) || got.Lines.Search != 3 {
			t.Errorf("%s: %+v, want nameserver 10.0.0.2 (line 2), search corp.example (line 3)", nodeOS, got)
		}
	}
	if got := ReadHost("", "linux"); !got.Disabled {
		t.Errorf(`"": %+v, want disabled`, got)
	}
	for path, want := range map[string]string{"Host": "GetNetworkParams", filepath.Dir(path): "Unexpected resolver config value"} {
		if got := ReadHost(path, "windows"); got.Err == nil || !strings.Contains(got.Err.Error(), want) {
			t.Errorf("windows %q: err %v, want one with %q", path, got.Err, want)
		}
	}
	if got := ReadHost(filepath.Join(path, "missing"), "linux"); got.Err == nil {
		t.Error("a missing file: no error")
	}
}
