package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestHelp: -h and --help follow one rule for every subcommand and for
// dnsconfigurer itself (and help, help NAME): the usage on stderr, nothing
// on stdout, exit 0, as with the flag package's ExitOnError. No subcommand
// is a usage error.
func TestHelp(t *testing.T) {
	type tc struct {
		args  []string
		code  int
		usage string // the first line of stderr
	}
	top := "usage: dnsconfigurer <subcommand> [flags]"
	tests := []tc{
		{[]string{"-h"}, exitOK, top},
		{[]string{"--help"}, exitOK, top},
		{[]string{"help"}, exitOK, top},
		{[]string{"help", "help"}, exitOK, top},
		{[]string{"help", "-h"}, exitOK, top},
		{nil, exitUsage, top},
	}
	for _, n := range slices.Sorted(maps.Keys(commands)) {
		usage := "usage: dnsconfigurer " + n
		tests = append(tests, tc{[]string{n, "-h"}, exitOK, usage}, tc{[]string{n, "--help"}, exitOK, usage},
			tc{[]string{"help", n}, exitOK, usage})
	}
	for _, tc := range tests {
		name := strings.Join(tc.args, " ")
		if name == "" {
			name = "no subcommand"
		}
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := run(t, "", tc.args...)
			first, _, _ := strings.Cut(stderr, "\n")
			if code != tc.code || stdout != "" || !strings.HasPrefix(first, tc.usage) {
				t.Errorf("dnsconfigurer %s: exit %d, stdout %q, stderr starting %q; want exit %d, no stdout, stderr starting %q",
					strings.Join(tc.args, " "), code, stdout, first, tc.code, tc.usage)
			}
		})
	}
}

// TestHelpUnknown: an unknown subcommand or help topic is a usage error
// that says so and lists the subcommands on stderr.
func TestHelpUnknown(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		first string // the first line of stderr
	}{
		{[]string{"nosuch"}, `dnsconfigurer: unknown subcommand "nosuch"`},
		{[]string{"nosuch", "-h"}, `dnsconfigurer: unknown subcommand "nosuch"`},
		{[]string{"help", "nosuch"}, `dnsconfigurer help: unknown help topic "nosuch": want one subcommand`},
		{[]string{"help", "render", "validate"}, `dnsconfigurer help: unknown help topic "render validate": want one subcommand`},
		{[]string{"help", "--version"}, `dnsconfigurer help: unknown help topic "--version": want one subcommand`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(t, "", tc.args...)
			first, _, _ := strings.Cut(stderr, "\n")
			if code != exitUsage || stdout != "" || first != tc.first {
				t.Errorf("exit %d, stdout %q, stderr starting %q; want exit %d, no stdout, stderr starting %q", code, stdout, first, exitUsage, tc.first)
			}
			for n := range commands {
				if !strings.Contains(stderr, "\n  "+n+" ") {
					t.Errorf("stderr does not list %s:\n%s", n, stderr)
				}
			}
		})
	}
}
