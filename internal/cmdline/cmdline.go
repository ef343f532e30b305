// Package cmdline is the command-line plumbing the hack/ tools and
// dnsconfigurer share.
//
// Main stops on SIGINT and SIGTERM, NewFlagSet reports to stderr with a
// usage text, and ParseInterspersed takes positional arguments among the
// flags. It imports only the standard library.
package cmdline

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Main runs run with a context that SIGINT and SIGTERM cancel, the
// arguments after the program's name, stdout and stderr, then exits with
// the code run returns.
func Main(run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// NewFlagSet is the flag set of the command name: Parse returns its
// errors, printed on stderr with the usage: the text usage (when not
// ""), then the flags.
func NewFlagSet(name string, stderr io.Writer, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if usage != "" {
		fs.Usage = func() {
			fmt.Fprintln(stderr, usage)
			fs.PrintDefaults()
		}
	}
	return fs
}

// ParseInterspersed parses args into fs with the positional arguments
// anywhere among the flags, as kubectl takes them, and returns them in
// their order.
func ParseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
}
