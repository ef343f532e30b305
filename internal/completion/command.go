package completion

import (
	"flag"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Shells are the shells Write has a script for.
var Shells = []string{"bash", "zsh", "fish"}

// Command is what a script completes after a subcommand.
type Command struct {
	Name, Summary string
	Flags         []Flag
	// Words are its arguments when they are words, not files: help's
	// subcommands, completion's shells.
	Words []string
}

// Flag is one flag of a subcommand.
type Flag struct {
	Name  string // without dashes
	Usage string // its first line, shortened
	Value bool   // takes a value (not a bool flag)
}

// safeWord is what a name in the scripts may be: no quoting needed.
var safeWord = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// NewCommand is the subcommand name with the flags fs defines. A name the
// scripts cannot hold unquoted is an error.
func NewCommand(name, summary string, fs *flag.FlagSet, words []string) (Command, error) {
	c := Command{Name: name, Summary: summary, Words: words}
	var bad []string
	fs.VisitAll(func(f *flag.Flag) {
		if !safeWord.MatchString(f.Name) {
			bad = append(bad, f.Name)
		}
		c.Flags = append(c.Flags, flagOf(f))
	})
	if !safeWord.MatchString(name) || len(bad) > 0 {
		return Command{}, fmt.Errorf("subcommand %q: names the scripts cannot hold: %q", name, bad)
	}
	return c, nil
}

// Dashed is the flag as the scripts offer it: -x, or --name for a long
// one (the flag package takes either form).
func (f Flag) Dashed() string {
	if len(f.Name) == 1 {
		return "-" + f.Name
	}
	return "--" + f.Name
}

// FlagList is its flags, dashed, space-separated; ValueFlags those that
// take a value.
func (c Command) FlagList() string   { return c.flags(false) }
func (c Command) ValueFlags() string { return c.flags(true) }

func (c Command) flags(valued bool) string {
	var w []string
	for _, f := range c.Flags {
		if f.Value || !valued {
			w = append(w, f.Dashed())
		}
	}
	return strings.Join(w, " ")
}

// maxUsage bounds a flag's description in the zsh and fish menus.
const maxUsage = 72

func flagOf(f *flag.Flag) Flag {
	_, usage := flag.UnquoteUsage(f)
	usage, _, _ = strings.Cut(usage, "\n")
	if len(usage) > maxUsage {
		cut := strings.LastIndexByte(usage[:maxUsage], ' ')
		if cut <= 0 { // one long word: cut it at a rune
			cut = maxUsage
			for !utf8.RuneStart(usage[cut]) {
				cut--
			}
		}
		usage = usage[:cut] + "..."
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return Flag{Name: f.Name, Usage: usage, Value: !ok || !b.IsBoolFlag()}
}
