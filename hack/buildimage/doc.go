// Command buildimage is what hack/build-image runs: it builds the
// dnsconfigurer image with internal/imagebuild and writes the archive.
//
//	buildimage [--dir MODULE] [--platform linux/amd64|linux/arm64] [--push REF [--ca FILE] [--plain-http]] OUT.tar
//
// The image name is $IMAGE, default dnsconfigurer:<version>, the version
// `git describe --tags --always --dirty` or "devel"; every timestamp is
// $SOURCE_DATE_EPOCH or the HEAD commit's time. It prints one line: the
// archive, the name, the platform, the manifest digest and the sizes.
// With --push it then pushes the index as hack/push-image does.
package main
