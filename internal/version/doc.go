// Package version says which dnsconfigurer build runs: the version, the git
// revision and the Go version.
//
// They come from the binary's build information
// (runtime/debug.ReadBuildInfo). Releases override them at link time:
//
//	go build -ldflags "-X github.com/dnsconfigurer/dnsconfigurer/internal/version.version=v0.2.0 \
//	    -X github.com/dnsconfigurer/dnsconfigurer/internal/version.revision=$(git rev-parse HEAD)" ./cmd/dnsconfigurer
//
// hack/build-image sets both.
package version
