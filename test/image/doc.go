// Package image tests the image users deploy, end to end.
//
// The script hack/build-image builds one archive with an image index for
// linux/amd64 and linux/arm64, twice. The archives and their SBOMs must be
// byte-identical. The test lists the archive as ctr and docker read it. It
// checks each platform's files, config and binary, the SBOM against `go
// version -m` of the binary, and the version against the go command's own
// stamp. skopeo (containers/image) reads the archive as a docker-save
// archive by each tag and as an OCI archive.
//
// Then, as root with containerd installed (see test/e2e/containerd), it
// imports the archive with `ctr images import` into a harness containerd. It
// runs `dnsconfigurer render` in a container of the host's image as the
// image's non-root user. It imports every platform to read the other
// platform's config from containerd's content store.
//
// TestPushToRegistry pushes the archive with hack/push-image to a
// distribution registry with TLS (test/registry) and reads back the same
// bytes. As root it pulls the image by tag through containerd's CRI from a
// registry in the harness's network namespace, trusting its CA through
// hosts.toml. It skips without the registry binary
// (test/testbin/registry.sh). The tests build the archive once.
//
// The image builder itself, and the Dockerfile's agreement with it, are
// tested in internal/imagebuild.
package image
