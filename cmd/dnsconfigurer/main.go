// Command dnsconfigurer is the single binary of the project; each part of the
// DNS chain is a subcommand (see `dnsconfigurer help`).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Exit codes shared by every subcommand.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and the answer is "no" (or the service failed)
	exitUsage = 2 // bad flags or unreadable input
)

// command is one subcommand. run gets the arguments after the subcommand's
// name and returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// commands are every subcommand, in the order `dnsconfigurer help` lists
// them. Each one's flags and run loop live in its own file.
var commands = map[string]command{
	"convert":    {"convert a CoreDNS Corefile or coredns/kube-dns ConfigMap to serve's config, with a report of every directive", runConvert},
	"demo":       {"run the chain on the embedded examples: render a pod, serve the example objects, resolve through it", runDemo},
	"explain":    {"why a live pod has its resolv.conf: its node's settings, the trace, what its containers have", runExplain},
	"hostresolv": {"print the node resolver config pods get (--watch: every change)", runHostresolv},
	"nri":        {"NRI plugin for containerd 2.x: gives each container its pod's DNS, no kubelet change", nriCommand.main},
	"render":     {"print the resolv.conf a pod gets on a node", runRender},
	"serve":      {"run the cluster DNS server (Kubernetes DNS spec 1.1.0)", runServe},
	"shim":       {"CRI shim in front of containerd: rewrites each pod sandbox's DNS", shimCommand.main},
	"validate":   {"check a pod as the API server would (--strict: and as the node would)", runValidate},
	"version":    {"print the version, git revision and Go version of this build (also --version)", runVersion},
	"webhook":    {"validating admission webhook: reject at admission the pods the node would fail or trim", runWebhook},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// dispatch runs the subcommand args name. Help follows the flag package's
// rule for every command, this one included: -h, --help (and here help)
// print the usage on stderr and exit 0; no subcommand prints it and exits
// exitUsage. help NAME is NAME -h.
func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 2 && args[0] == "help" {
		if _, ok := commands[args[1]]; ok {
			args = []string{args[1], "-h"}
		}
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	name := args[0]
	if name == "--version" || name == "-version" {
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "dnsconfigurer: unknown subcommand %q (see `dnsconfigurer help`)\n", name)
		return exitUsage
	}
	return c.run(ctx, args[1:], stdin, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: dnsconfigurer <subcommand> [flags]\n       dnsconfigurer --version\n\nsubcommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun `dnsconfigurer <subcommand> -h` for its flags.")
}
