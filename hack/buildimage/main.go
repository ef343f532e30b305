package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/cmdline"
	"github.com/dnsconfigurer/dnsconfigurer/internal/imagebuild"
)

func main() { cmdline.Main(run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cmdline.NewFlagSet("build-image", stderr, "usage: hack/build-image OUT.tar [--platform linux/amd64,linux/arm64] [--push REF [--ca FILE] [--plain-http]] | --print-version\n"+
		"  writes one archive with an image index (OUT.tar) and its SPDX SBOM (OUT.spdx.json)\n"+
		"  $IMAGE names the image (default dnsconfigurer:<version>: the semver tag on HEAD, else a Go pseudo-version);\n"+
		"  $SOURCE_DATE_EPOCH sets its time (default: the HEAD commit's)")
	dir := fs.String("dir", ".", "the module's root directory")
	platforms := fs.String("platform", strings.Join(imagebuild.DefaultPlatforms, ","), "the image index's platforms, comma-separated: linux/amd64, linux/arm64")
	caCerts := fs.String("ca-certificates", imagebuild.DefaultCACerts, "the CA bundle to copy into the image")
	push := fs.String("push", "", "after the build, push the image index to this REGISTRY/REPOSITORY:TAG (as hack/push-image)")
	var pushOpts imagebuild.PushOptions
	fs.StringVar(&pushOpts.CAFile, "ca", "", "with --push: a PEM CA bundle to trust for the registry's TLS")
	fs.BoolVar(&pushOpts.PlainHTTP, "plain-http", false, "with --push: talk plain HTTP to a registry without TLS")
	printVersion := fs.Bool("print-version", false, "print the version and revision the image would have, and build nothing")
	// The archive may come before or after the flags.
	pos, err := cmdline.ParseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) > 1 {
		fmt.Fprintf(stderr, "build-image: unexpected argument %q\n", pos[1])
		return 2
	}
	var out string
	if len(pos) == 1 {
		out = pos[0]
	}
	if *printVersion {
		v, r := imagebuild.GitVersion(ctx, *dir)
		fmt.Fprintln(stdout, v, r)
		return 0
	}
	if out == "" {
		fs.Usage()
		return 2
	}
	start := time.Now()
	res, err := imagebuild.BuildFile(ctx, out, imagebuild.Options{
		Dir: *dir, Platforms: strings.Split(*platforms, ","), Name: os.Getenv("IMAGE"), CACerts: *caCerts,
	})
	if err != nil {
		fmt.Fprintf(stderr, "build-image: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s index %s (version %s, revision %s, time %s; %s)\n",
		out, res.Name, res.Digest, res.Version, res.Revision, res.Time.Format(time.RFC3339), time.Since(start).Round(100*time.Millisecond))
	for _, img := range res.Images {
		fmt.Fprintf(stdout, "  %s %s docker load tags %s (binary %.1f MiB, layer %.1f MiB)\n",
			img.Platform, img.Digest, strings.Join(img.Tags, " "), float64(img.BinarySize)/(1<<20), float64(img.LayerSize)/(1<<20))
	}
	fmt.Fprintf(stdout, "%s: SPDX 2.3 SBOM\n", imagebuild.SBOMPath(out))
	if *push == "" {
		return 0
	}
	pushed, err := imagebuild.Push(ctx, out, *push, pushOpts)
	if err != nil {
		fmt.Fprintf(stderr, "build-image: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "pushed %s (%.1f MiB, %s):\n%s", *push, float64(pushed.Bytes)/(1<<20), pushed.Took.Round(time.Millisecond), pushed)
	return 0
}
