package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

func init() {
	register("render", command{summary: "print the resolv.conf a pod gets on a node", run: runRender})
}

// renderJSON is the -o json and -o yaml contract of render.
type renderJSON struct {
	Nameservers []string      `json:"nameservers"`
	Searches    []string      `json:"searches"`
	Options     []string      `json:"options"`
	Hostname    string        `json:"hostname"`
	FQDN        string        `json:"fqdn"`
	Warnings    []warningJSON `json:"warnings"`
}

type warningJSON struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func runRender(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var node nodeFlags
	node.register(fs)
	file := fs.String("f", "", "pod manifest (YAML or JSON), - for stdin")
	out := fs.String("o", "resolv.conf", "output: resolv.conf, json or yaml")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dnsconfigurer render -f POD.yaml [--cluster-dns IP[,IP...]] [--cluster-domain DOMAIN] [--resolv-conf PATH] [--node-os linux|windows] [-o resolv.conf|json|yaml]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "render: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if err := checkOutput(*out, "resolv.conf", outJSON, outYAML); err != nil {
		fmt.Fprintf(stderr, "render: %v\n", err)
		return exitUsage
	}
	eng, err := node.engine()
	if err != nil {
		fmt.Fprintf(stderr, "render: --node-os: %v\n", err)
		return exitUsage
	}
	pod, err := readPod(*file, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "render: %v\n", err)
		return exitUsage
	}
	res, err := eng.Compute(podspec.Input(pod), loadHost(node.resolvConf, node.nodeOS))
	warnings := append(append([]policy.Warning(nil), eng.Warnings()...), res.Warnings...)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "Warning: %s: %s\n", w.Reason, w.Message)
	}
	if err != nil {
		fmt.Fprintf(stderr, "render: kubelet would fail the sandbox of pod %q: %v\n", pod.Namespace+"/"+pod.Name, err)
		return exitFail
	}
	return printRender(stdout, stderr, *out, res, warnings)
}

// printRender prints the result as -o asks.
func printRender(stdout, stderr io.Writer, out string, res policy.Result, warnings []policy.Warning) int {
	if out == "resolv.conf" {
		io.WriteString(stdout, resolvconf.Format(res.Config()))
		return exitOK
	}
	j := renderJSON{Nameservers: res.Nameservers, Searches: res.Searches, Options: res.Options,
		Hostname: res.Hostname, FQDN: res.FQDN, Warnings: []warningJSON{}}
	for _, w := range warnings {
		j.Warnings = append(j.Warnings, warningJSON{Reason: w.Reason, Message: w.Message})
	}
	if err := writeOutput(stdout, out, j); err != nil {
		fmt.Fprintf(stderr, "render: %v\n", err)
		return exitFail
	}
	return exitOK
}
