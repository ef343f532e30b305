package main

import (
	"flag"
	"io"
	"log/slog"

	"github.com/dnsconfigurer/dnsconfigurer/internal/logflags"
)

// Log formats of --log-format.
const (
	logText = logflags.Text
	logJSON = logflags.JSON
)

// logFlags are the logging flags every long-running command takes.
type logFlags struct {
	format string
	level  string
}

// register defines --log-format (default defaultFormat) and --log-level
// (default info) on fs.
func (l *logFlags) register(fs *flag.FlagSet, defaultFormat string) {
	logflags.Register(fs, &l.format, &l.level, defaultFormat)
}

// check validates both flags, naming the one at fault.
func (l *logFlags) check() error {
	_, err := newLogger(io.Discard, l.format, l.level)
	return err
}

// parseDaemonFlags parses args into fs for a long-running command: no
// positional argument, and log flags that make a logger.
func parseDaemonFlags(fs *flag.FlagSet, args []string, l *logFlags) error {
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	return l.check()
}

// logger is the command's logger on w.
func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	return newLogger(w, l.format, l.level)
}

// newLogger is logflags.New; a bad flag is a usage error.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	log, err := logflags.New(w, format, level)
	return log, asUsage(err)
}

// parseLevel is logflags.ParseLevel; a bad level is a usage error.
func parseLevel(level string) (slog.Level, error) {
	lv, err := logflags.ParseLevel(level)
	return lv, asUsage(err)
}

// newLeveledLogger is logflags.NewLeveled; a bad format is a usage error.
func newLeveledLogger(w io.Writer, format string, level slog.Leveler) (*slog.Logger, error) {
	log, err := logflags.NewLeveled(w, format, level)
	return log, asUsage(err)
}

func asUsage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}
