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
	fs := flag.NewFlagSet("push-image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts imagebuild.PushOptions
	fs.StringVar(&opts.CAFile, "ca", "", "a PEM CA bundle to trust for the registry's TLS, besides the system's")
	fs.BoolVar(&opts.PlainHTTP, "plain-http", false, "talk plain HTTP to a registry without TLS")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: hack/push-image ARCHIVE REGISTRY/REPOSITORY:TAG [--ca FILE] [--plain-http]")
		fmt.Fprintln(stderr, "  pushes the image index of an archive hack/build-image wrote, every platform, digests unchanged;")
		fmt.Fprintln(stderr, "  credentials come from the docker config ($DOCKER_CONFIG, docker login)")
		fs.PrintDefaults()
	}
	// The arguments may come before or after the flags.
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) != 2 {
		fs.Usage()
		return 2
	}
	res, err := imagebuild.Push(ctx, pos[0], pos[1], opts)
	if err != nil {
		fmt.Fprintf(stderr, "push-image: %v\n", err)
		return 1
	}
	fmt.Fprint(stdout, res)
	fmt.Fprintf(stderr, "push-image: %s: %d images, %.1f MiB, %s\n", pos[1], len(res.Images), float64(res.Bytes)/(1<<20), res.Took.Round(time.Millisecond))
	return 0
}
