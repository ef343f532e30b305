package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// Set at link time (-ldflags -X); empty means "from the build info".
var (
	version  string
	revision string
)

// Info describes the running build.
type Info struct {
	// Version is the release ("v0.2.0"), the module version when built by
	// `go install module@version`, else "devel".
	Version string `json:"version"`
	// Revision is the git commit (with "-dirty" when the tree had local
	// changes), or "unknown".
	Revision string `json:"revision"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"goVersion"`
}

var get = sync.OnceValue(func() Info {
	bi, ok := debug.ReadBuildInfo()
	return fromBuildInfo(bi, ok, version, revision)
})

// Get returns the running build's Info.
func Get() Info { return get() }

// fromBuildInfo is Get's rule: link-time values win, then the build info.
func fromBuildInfo(bi *debug.BuildInfo, ok bool, ldVersion, ldRevision string) Info {
	in := Info{Version: ldVersion, Revision: ldRevision, GoVersion: runtime.Version()}
	if ok && bi != nil {
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		if in.Revision == "" {
			var rev string
			dirty := false
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if rev != "" && dirty {
				rev += "-dirty"
			}
			in.Revision = rev
		}
	}
	if in.Version == "" {
		in.Version = "devel"
	}
	if in.Revision == "" {
		in.Revision = "unknown"
	}
	return in
}

// String is the one-line form: "dnsconfigurer v0.2.0 (revision abc123, go1.26.0)".
func (i Info) String() string {
	return fmt.Sprintf("dnsconfigurer %s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}

// UserAgent is the User-Agent for the API server: "dnsconfigurer-<component>/<version>".
func (i Info) UserAgent(component string) string {
	return fmt.Sprintf("dnsconfigurer-%s/%s (%s/%s) %s", component, i.Version, runtime.GOOS, runtime.GOARCH, shortRev(i.Revision))
}

func shortRev(r string) string {
	if len(r) > 12 && r != "unknown" {
		return r[:12]
	}
	return r
}
