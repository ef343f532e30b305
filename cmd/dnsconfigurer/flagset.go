package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/dnsconfigurer/dnsconfigurer/internal/cmdline"
)

// newFlagSet is the flag set of the command name: its errors and its usage
// go to stderr, the usage text first, then the flags. A stderr that is a
// flagRecorder is handed the flag set.
func newFlagSet(name string, stderr io.Writer, usage string) *flag.FlagSet {
	fs := cmdline.NewFlagSet(name, stderr, usage)
	if r, ok := stderr.(flagRecorder); ok {
		r.recordFlags(fs)
	}
	return fs
}

// flagRecorder is a stderr that keeps the flag sets made for it.
// Completion runs each command with -h and such a stderr, so the scripts
// come from the flags the commands really define.
type flagRecorder interface {
	io.Writer
	recordFlags(fs *flag.FlagSet)
}

// usageExit prints err after the command's name on stderr and is
// exitUsage.
func usageExit(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
	return exitUsage
}

// parseExit is the exit code of a failed flag parse: -h and --help
// (flag.ErrHelp, the usage already printed on stderr) exit 0, as with the
// flag package's ExitOnError; a bad flag exits exitUsage.
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// parseNoArgs parses args into fs, which takes no positional argument.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return extraArg(fs.Arg(0))
	}
	return nil
}

// extraArg is a positional argument where a command takes none.
type extraArg string

func (a extraArg) Error() string { return fmt.Sprintf("unexpected argument %q", string(a)) }

// parseCommand is parseNoArgs for a command that runs next: false with the
// exit code when it must not run, the error printed (the flag package
// prints its own; an argument as "<name>: unexpected argument").
func parseCommand(fs *flag.FlagSet, args []string) (int, bool) {
	err := parseNoArgs(fs, args)
	var extra extraArg
	switch {
	case err == nil:
		return exitOK, true
	case errors.As(err, &extra):
		fmt.Fprintf(fs.Output(), "%s: %v\n", fs.Name(), err)
		return exitUsage, false
	}
	return parseExit(err), false
}
