// Package imagebuild builds the dnsconfigurer container image offline and
// reproducibly, as hack/build-image does and as test/cluster imports it.
//
// Build compiles ./cmd/dnsconfigurer statically for one platform (linux/amd64
// or linux/arm64) and writes a single-layer image holding nothing but
//
//	/usr/local/bin/dnsconfigurer         the binary, mode 0755
//	/etc/ssl/certs/ca-certificates.crt   the build machine's Debian CA bundle
//	/etc/passwd, /etc/group              root, nobody and nonroot (65532), as distroless
//	/tmp, /home/nonroot                  as distroless: sticky 1777, and nonroot's 0700 home
//
// with the entrypoint the binary, user 65532:65532, PATH and SSL_CERT_FILE in
// the environment and the org.opencontainers.image.{version,revision,source}
// labels. The repository's Dockerfile builds the same layout on
// gcr.io/distroless/static-debian12:nonroot; its test keeps the two equal.
//
// The archive is one tar that is both an OCI image layout (oci-layout,
// index.json, blobs/sha256/...) and a `docker save` archive (manifest.json
// with RepoTags), as `docker save` writes since Docker 25: `ctr images
// import` reads the layout and names the image after the index's
// io.containerd.image.name annotation, `docker load` reads manifest.json.
//
// The same inputs give the same bytes: the source tree, the Go toolchain,
// the CA bundle, the name and the time, which is $SOURCE_DATE_EPOCH or else
// the HEAD commit's time. Every file in the layer and in the archive has that
// time, uid and gid 0 (nonroot's home 65532) and a fixed mode, entries are
// sorted, and the binary is built with -trimpath and without VCS stamping
// (the version and revision are set with -ldflags -X instead, see
// internal/version).
//
// The image is written with github.com/google/go-containerregistry: it makes
// the layer's compression, the config, the manifest and the index; this
// package only lays out the files and the tar that holds the blobs.
//
// This package runs the go and git commands; only build tooling (hack/,
// tests) imports it, never the product.
package imagebuild
