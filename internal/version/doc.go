// Package version says which dnsconfigurer build runs: the version, the
// git revision and the Go version, from the binary's build information
// (runtime/debug.ReadBuildInfo), with link-time overrides for releases:
//
//	go build -ldflags "-X github.com/dnsconfigurer/dnsconfigurer/internal/version.version=v0.2.0 \
//	    -X github.com/dnsconfigurer/dnsconfigurer/internal/version.revision=$(git rev-parse HEAD)" ./cmd/dnsconfigurer
//
// hack/build-image sets both.
package version
