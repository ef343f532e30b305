package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/internal/completion"
)

func runCompletion(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("completion", stderr, "usage: dnsconfigurer completion bash|zsh|fish\n\n"+
		"Prints a completion script of the subcommands and of each one's flags, read from\n"+
		"the flags the subcommands define. Load it in the current shell with\n"+
		"  bash: source <(dnsconfigurer completion bash)\n"+
		"  zsh:  source <(dnsconfigurer completion zsh)   (after compinit; or save it as _dnsconfigurer in $fpath)\n"+
		"  fish: dnsconfigurer completion fish | source  (or save it in ~/.config/fish/completions/dnsconfigurer.fish)")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() != 1 || !slices.Contains(completion.Shells, fs.Arg(0)) {
		return usageExit(stderr, "completion", fmt.Errorf("want one shell: %s", strings.Join(completion.Shells, ", ")))
	}
	cmds, err := completionCommands(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "completion: %v\n", err)
		return exitFail
	}
	if err := completion.Write(stdout, fs.Arg(0), cmds); err != nil {
		fmt.Fprintf(stderr, "completion: %v\n", err)
		return exitFail
	}
	return exitOK
}

// flagSets is a stderr that discards the usage and keeps the flag sets.
type flagSets struct{ sets []*flag.FlagSet }

func (r *flagSets) Write(p []byte) (int, error)  { return len(p), nil }
func (r *flagSets) recordFlags(fs *flag.FlagSet) { r.sets = append(r.sets, fs) }

// completionCommands are the subcommands with the flags each defines,
// read by running it with -h, and help.
func completionCommands(ctx context.Context) ([]completion.Command, error) {
	names := slices.Sorted(maps.Keys(commands))
	cmds := []completion.Command{{Name: "help", Summary: "print the usage, or a subcommand's", Words: names}}
	for _, name := range names {
		rec := &flagSets{}
		code := commands[name].run(ctx, []string{"-h"}, strings.NewReader(""), io.Discard, rec)
		if code != exitOK || len(rec.sets) != 1 {
			return nil, fmt.Errorf("read the flags of %s: exit %d, %d flag sets", name, code, len(rec.sets))
		}
		var words []string
		if name == "completion" {
			words = completion.Shells
		}
		c, err := completion.NewCommand(name, commands[name].summary, rec.sets[0], words)
		if err != nil {
			return nil, err
		}
		cmds = append(cmds, c)
	}
	slices.SortFunc(cmds, func(a, b completion.Command) int { return strings.Compare(a.Name, b.Name) })
	return cmds, nil
}
