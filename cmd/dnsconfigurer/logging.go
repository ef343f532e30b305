package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Log formats and levels of --log-format and --log-level (and of the
// ServerConfiguration's logFormat and logLevel).
const (
	logText = "text"
	logJSON = "json"
)

var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
}

// logFlags are the logging flags every long-running command takes.
type logFlags struct {
	format string
	level  string
}

// register defines --log-format (default defaultFormat) and --log-level
// (default info) on fs.
func (l *logFlags) register(fs *flag.FlagSet, defaultFormat string) {
	fs.StringVar(&l.format, "log-format", defaultFormat, "log format on stderr: text or json")
	fs.StringVar(&l.level, "log-level", "info", "least severe level logged: debug, info, warn or error")
}

// check validates both flags, naming the one at fault.
func (l *logFlags) check() error {
	_, err := newLogger(io.Discard, l.format, l.level)
	return err
}

// parseDaemonFlags parses args into fs for a long-running command: no
// positional argument, and log flags that make a logger.
func parseDaemonFlags(fs *flag.FlagSet, args []string, l *logFlags) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return l.check()
}

// logger is the command's logger on w.
func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	return newLogger(w, l.format, l.level)
}

// newLogger is the one constructor of the logger of a long-running
// command: format text or json, writing to w (stderr) from level on.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	lv, ok := logLevels[level]
	if !ok {
		return nil, usagef("--log-level %q: must be debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case logText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case logJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format %q: must be text or json", format)
}
