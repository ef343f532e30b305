package main

import (
	"context"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/internal/version"
)

func runVersion(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", stderr, "usage: dnsconfigurer version [-o text|json|yaml]   (or dnsconfigurer --version)")
	out := fs.String("o", "text", "output: text, json or yaml")
	if code, ok := parseCommand(fs, args); !ok {
		return code
	}
	if err := checkOutput(*out, "text", outJSON, outYAML); err != nil {
		return exitCode(stderr, "version", usageError{err})
	}
	info := version.Get()
	if *out == "text" {
		fmt.Fprintln(stdout, info.String())
		return exitOK
	}
	return exitCode(stderr, "version", writeOutput(stdout, *out, info))
}

// buildInfo is dnsconfigurer_build_info{version,revision,goversion}, always
// 1: what CoreDNS's coredns_build_info is for dashboards and alerts.
func buildInfo(i version.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dnsconfigurer_build_info",
		Help: "A metric with a constant '1' value labelled by the version, git revision and Go version of the running binary.",
		ConstLabels: prometheus.Labels{
			"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion,
		},
	})
	g.Set(1)
	return g
}
