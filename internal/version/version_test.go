package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	tests := []struct {
		name     string
		bi       *debug.BuildInfo
		ok       bool
		ldv, ldr string
		want     Info
	}{
		{"no build info", nil, false, "", "", Info{"devel", "unknown", ""}},
		{"local build", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs("abc", "false")}, true, "", "",
			Info{"devel", "abc", "go1.26.0"}},
		{"dirty tree", &debug.BuildInfo{GoVersion: "go1.26.0", Settings: vcs("abc", "true")}, true, "", "",
			Info{"devel", "abc-dirty", "go1.26.0"}},
		{"go install module@version", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.0"}}, true, "", "",
			Info{"v0.3.0", "unknown", "go1.26.0"}},
		{"ldflags win", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.0"}, Settings: vcs("abc", "true")}, true, "v1.0.0", "def",
			Info{"v1.0.0", "def", "go1.26.0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := fromBuildInfo(tc.bi, tc.ok, tc.ldv, tc.ldr)
			if tc.want.GoVersion == "" {
				tc.want.GoVersion = got.GoVersion // runtime.Version()
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestGetIsStable(t *testing.T) {
	a, b := Get(), Get()
	if a != b || a.Version == "" || a.Revision == "" || a.GoVersion == "" {
		t.Errorf("Get: %+v then %+v", a, b)
	}
}
