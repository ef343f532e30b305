// Command pushimage is what hack/push-image runs: it pushes the image index
// of an archive hack/build-image wrote to a registry, with
// internal/imagebuild.
//
//	pushimage [--ca FILE] [--plain-http] ARCHIVE REGISTRY/REPOSITORY:TAG
//
// It prints the pushed reference by digest, then each platform's manifest
// digest. Credentials come from the docker config.
package main
