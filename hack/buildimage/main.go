package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/imagebuild"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("build-image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".", "the module's root directory")
	platforms := fs.String("platform", strings.Join(imagebuild.DefaultPlatforms, ","), "the image index's platforms, comma-separated: linux/amd64, linux/arm64")
	caCerts := fs.String("ca-certificates", imagebuild.DefaultCACerts, "the CA bundle to copy into the image")
	push := fs.String("push", "", "after the build, push the image index to this REGISTRY/REPOSITORY:TAG (as hack/push-image)")
	var pushOpts imagebuild.PushOptions
	fs.StringVar(&pushOpts.CAFile, "ca", "", "with --push: a PEM CA bundle to trust for the registry's TLS")
	fs.BoolVar(&pushOpts.PlainHTTP, "plain-http", false, "with --push: talk plain HTTP to a registry without TLS")
	printVersion := fs.Bool("print-version", false, "print the version and revision the image would have, and build nothing")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: hack/build-image OUT.tar [--platform linux/amd64,linux/arm64] [--push REF [--ca FILE] [--plain-http]] | --print-version")
		fmt.Fprintln(stderr, "  writes one archive with an image index (OUT.tar) and its SPDX SBOM (OUT.spdx.json)")
		fmt.Fprintln(stderr, "  $IMAGE names the image (default dnsconfigurer:<version>: the semver tag on HEAD, else a Go pseudo-version);")
		fmt.Fprintln(stderr, "  $SOURCE_DATE_EPOCH sets its time (default: the HEAD commit's)")
		fs.PrintDefaults()
	}
	// The archive may come before or after the flags.
	var out string
	for {
		if err := fs.Parse(args); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		if out != "" {
			fmt.Fprintf(stderr, "build-image: unexpected argument %q\n", fs.Arg(0))
			return 2
		}
		out, args = fs.Arg(0), fs.Args()[1:]
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
