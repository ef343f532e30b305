package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
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
	platform := fs.String("platform", "", "linux/amd64 or linux/arm64 (default: linux and the host's architecture)")
	caCerts := fs.String("ca-certificates", imagebuild.DefaultCACerts, "the CA bundle to copy into the image")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: hack/build-image OUT.tar [--platform linux/amd64|linux/arm64]")
		fmt.Fprintln(stderr, "  $IMAGE names the image (default dnsconfigurer:<git describe>); $SOURCE_DATE_EPOCH sets its time (default: the HEAD commit's)")
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
	if out == "" {
		fs.Usage()
		return 2
	}
	start := time.Now()
	res, err := imagebuild.BuildFile(ctx, out, imagebuild.Options{
		Dir: *dir, Platform: *platform, Name: os.Getenv("IMAGE"), CACerts: *caCerts,
	})
	if err != nil {
		fmt.Fprintf(stderr, "build-image: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s %s %s (version %s, revision %s, time %s; binary %.1f MiB, layer %.1f MiB; %s)\n",
		out, res.Name, res.Platform, res.Digest, res.Version, res.Revision, res.Time.Format(time.RFC3339),
		float64(res.BinarySize)/(1<<20), float64(res.LayerSize)/(1<<20), time.Since(start).Round(100*time.Millisecond))
	return 0
}
