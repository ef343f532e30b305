package nodesettings

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// TestHostRoundTrip: the Host published from a snapshot gives the engine
// what the agent's own snapshot gives it (podfacts.HostOf), named
// by its path.
func TestHostRoundTrip(t *testing.T) {
	raw := resolvconf.Config{Nameservers: []string{"127.0.0.53", "192.0.2.1"}, Searches: []string{"corp.example"}, Options: []string{"edns0"}}
	for _, tc := range []struct {
		name string
		snap hostresolv.Snapshot
	}{
		{"good", hostresolv.Snapshot{Path: "/etc/resolv.conf", Raw: raw, Generation: 2}},
		{"last-good", hostresolv.Snapshot{Path: "/etc/resolv.conf", Raw: raw, Generation: 3, Problem: errors.New("line 2: bad")}},
		{"disabled", hostresolv.Snapshot{Disabled: true, Generation: 1}},
		{"unusable", hostresolv.Snapshot{Path: "/etc/resolv.conf", Generation: 1, Err: errors.New("no such file")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := HostOf(tc.snap)
			if h.Healthy != (tc.snap.Problem == nil && tc.snap.Err == nil) || h.Generation != tc.snap.Generation {
				t.Errorf("HostOf = %+v", h)
			}
			got, want := h.Policy(), podfacts.HostOf(tc.snap)
			if (got.Err == nil) != (want.Err == nil) || (got.Err != nil && got.Err.Error() != want.Err.Error()) {
				t.Errorf("Err = %v, want %v", got.Err, want.Err)
			}
			got.Err, want.Err, want.Source = nil, nil, tc.snap.Path
			if !reflect.DeepEqual(norm(got), norm(want)) {
				t.Errorf("Policy() = %+v, want %+v", got, want)
			}
		})
	}
}

func norm(h policy.Host) policy.Host {
	for _, l := range []*[]string{&h.Nameservers, &h.Searches, &h.Options} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	return h
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler(func() Settings { return Settings{Kind: KindNRI} }))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(b), `"kind": "nri"`) {
		t.Errorf("%s %q", resp.Header.Get("Content-Type"), b)
	}
}
