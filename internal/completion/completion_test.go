package completion

import (
	"flag"
	"strings"
	"testing"
)

// TestNewCommand: flags keep their first usage line, cut at a word (or
// a rune) past maxUsage; bool flags take no value; a name the scripts
// cannot hold is an error.
func TestNewCommand(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Bool("watch", false, "keep running\nand print")
	fs.String("o", "", "output `FORMAT`")
	fs.String("long", "", strings.Repeat("word ", 20))
	fs.String("one", "", strings.Repeat("é", 50))
	c, err := NewCommand("x", "does x", fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Flag{
		{Name: "long", Usage: strings.Repeat("word ", 14)[:69] + "...", Value: true},
		{Name: "o", Usage: "output FORMAT", Value: true},
		{Name: "one", Usage: strings.Repeat("é", 36) + "...", Value: true},
		{Name: "watch", Usage: "keep running", Value: false},
	}
	for i, f := range c.Flags {
		if i >= len(want) || f != want[i] {
			t.Errorf("flag %d: %+v, want %+v", i, f, want[min(i, len(want)-1)])
		}
	}
	if got := c.FlagList() + " | " + c.ValueFlags(); got != "--long -o --one --watch | --long -o --one" {
		t.Errorf("FlagList | ValueFlags = %q", got)
	}
	fs.String("bad name", "", "")
	if _, err := NewCommand("x", "", fs, nil); err == nil || !strings.Contains(err.Error(), `"bad name"`) {
		t.Errorf("bad flag name: err %v", err)
	}
}

// TestWrite: each shell's script names the subcommands; another shell is
// an error.
func TestWrite(t *testing.T) {
	cmds := []Command{{Name: "help", Words: []string{"x"}}, {Name: "x", Summary: "it's x", Flags: []Flag{{Name: "o", Value: true}}}}
	for _, shell := range Shells {
		var b strings.Builder
		if err := Write(&b, shell, cmds); err != nil || !strings.Contains(b.String(), "dnsconfigurer") {
			t.Errorf("%s: err %v, script:\n%s", shell, err, b.String())
		}
	}
	if err := Write(&strings.Builder{}, "tcsh", cmds); err == nil {
		t.Error("tcsh: no error")
	}
}
