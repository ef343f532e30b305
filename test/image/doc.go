// Package image tests the image users deploy, end to end: hack/build-image
// builds it for linux/amd64 and linux/arm64, twice each (the archives must
// be byte-identical); the test lists the archive, checks the files, the
// config and the binary; then, as root with containerd installed (see
// test/e2e/containerd), it imports the host's archive with `ctr images
// import` into a harness containerd and runs `dnsconfigurer render` in a
// container of it, as the image's non-root user.
//
// The image builder itself, and the Dockerfile's agreement with it, are
// tested in internal/imagebuild.
package image
