package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/cmdline"
	"github.com/dnsconfigurer/dnsconfigurer/internal/imagebuild"
)

func main() { cmdline.Main(run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cmdline.NewFlagSet("push-image", stderr, "usage: hack/push-image ARCHIVE REGISTRY/REPOSITORY:TAG [--ca FILE] [--plain-http]\n"+
		"  pushes the image index of an archive hack/build-image wrote, every platform, digests unchanged;\n"+
		"  credentials come from the docker config ($DOCKER_CONFIG, docker login)")
	var opts imagebuild.PushOptions
	fs.StringVar(&opts.CAFile, "ca", "", "a PEM CA bundle to trust for the registry's TLS, besides the system's")
	fs.BoolVar(&opts.PlainHTTP, "plain-http", false, "talk plain HTTP to a registry without TLS")
	// The arguments may come before or after the flags.
	pos, err := cmdline.ParseInterspersed(fs, args)
	if err != nil {
		return 2
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
