// Command dnsconfigurer is the single binary of the project; each part of the
// DNS chain is a subcommand (see `dnsconfigurer help`).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
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

// commands are every subcommand; `dnsconfigurer help` lists them sorted.
// Each one's flags and run loop live in its own file. init fills the
// table: completion reads it, and an initialiser that reads itself is a
// cycle.
var commands map[string]command

func init() {
	commands = map[string]command{
		"completion": {"print a bash, zsh or fish completion script of these subcommands and their flags", runCompletion},
		"convert":    {"convert a Corefile or a coredns, kube-dns or NodeLocal DNSCache ConfigMap to serve's config, with a report of every directive", runConvert},
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
// exitUsage. help NAME is NAME -h. An unknown subcommand or help topic
// exits exitUsage with the list of subcommands.
func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help":
		return help(ctx, args[1:], stdin, stdout, stderr)
	case "-h", "--help":
		usage(stderr)
		return exitOK
	case "--version", "-version":
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "dnsconfigurer: unknown subcommand %q\n\n", name)
		usage(stderr)
		return exitUsage
	}
	return c.run(ctx, args[1:], stdin, stdout, stderr)
}

// help is `dnsconfigurer help [TOPIC]`: the usage, or TOPIC -h for a
// subcommand. An unknown topic is a usage error, with the list.
func help(ctx context.Context, topics []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(topics) == 0 || len(topics) == 1 && slices.Contains([]string{"help", "-h", "--help"}, topics[0]) {
		usage(stderr)
		return exitOK
	}
	if c, ok := commands[topics[0]]; ok && len(topics) == 1 {
		return c.run(ctx, []string{"-h"}, stdin, stdout, stderr)
	}
	fmt.Fprintf(stderr, "dnsconfigurer help: unknown help topic %q: want one subcommand\n\n", strings.Join(topics, " "))
	usage(stderr)
	return exitUsage
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
