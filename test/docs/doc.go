// Package docs keeps docs/compatibility.md true to the repository.
//
// The "Tested in CI" rows must name exactly the versions that the pin files
// (test/testbin, test/e2e, go.mod) build or install. The coupling constants,
// config kinds and the minimum Kubernetes version must match the code and
// deploy/. A pin changed without the page fails here.
package docs
