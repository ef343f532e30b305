package main

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/completion"
)

// TestCompletion: the scripts come out for each shell, and anything else
// is a usage error naming the shells.
func TestCompletion(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // a substring
		stderr string
	}{
		{[]string{"bash"}, exitOK, "complete -o bashdefault -o default -F _dnsconfigurer dnsconfigurer\n", ""},
		{[]string{"zsh"}, exitOK, "#compdef dnsconfigurer\n", ""},
		{[]string{"fish"}, exitOK, "complete -c dnsconfigurer -n '__fish_seen_subcommand_from convert' -l output -r -d 'write the result to FILE instead of stdout'\n", ""},
		{nil, exitUsage, "", "completion: want one shell: bash, zsh, fish\n"},
		{[]string{"tcsh"}, exitUsage, "", "completion: want one shell: bash, zsh, fish\n"},
		{[]string{"bash", "zsh"}, exitUsage, "", "completion: want one shell: bash, zsh, fish\n"},
	} {
		name := strings.Join(tc.args, " ")
		if name == "" {
			name = "no shell"
		}
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := run(t, "", append([]string{"completion"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || stderr != tc.stderr {
				t.Errorf("exit %d, stderr %q, stdout:\n%s\nwant exit %d, stderr %q, stdout with %q", code, stderr, stdout, tc.code, tc.stderr, tc.stdout)
			}
		})
	}
}

// TestCompletionCommands: the scripts' source is every subcommand with the
// flags its flag set defines, and help.
func TestCompletionCommands(t *testing.T) {
	cmds, err := completionCommands(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]completion.Command{}
	for _, c := range cmds {
		byName[c.Name] = c
	}
	want := append(slices.Collect(maps.Keys(commands)), "help")
	if got := slices.Sorted(maps.Keys(byName)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("commands %q, want %q", got, want)
	}
	for _, tc := range []struct {
		cmd, flag string
		value     bool
	}{
		{"convert", "o", true}, {"convert", "output", true}, {"hostresolv", "watch", false},
		{"render", "f", true}, {"render", "R", false}, {"serve", "listen", true},
	} {
		i := slices.IndexFunc(byName[tc.cmd].Flags, func(f completion.Flag) bool { return f.Name == tc.flag })
		if i < 0 || byName[tc.cmd].Flags[i].Value != tc.value {
			t.Errorf("%s: flag %s missing or value %v: %+v", tc.cmd, tc.flag, !tc.value, byName[tc.cmd].Flags)
		}
	}
}

// TestCompletionShells loads each script in its shell, as a user does,
// from this binary (re-executed as dnsconfigurer in PATH), and completes
// command lines: a subcommand, a flag, a flag's value (files: the shell's
// own), help's topics and completion's shells. A shell that is not
// installed is skipped.
func TestCompletionShells(t *testing.T) {
	runChild()
	convertFlags := completionFlagsOf(t, "convert")
	var all []string
	for _, c := range mustCompletionCommands(t) {
		all = append(all, c.Name)
	}
	lines := []struct {
		line string
		want []string // nil: none offered by the script (the shell's files)
	}{
		{"dnsconfigurer con", []string{"convert"}},
		{"dnsconfigurer ", all},
		{"dnsconfigurer convert --o", []string{"--output"}},
		{"dnsconfigurer convert -", convertFlags},
		{"dnsconfigurer hostresolv --w", []string{"--watch"}},
		{"dnsconfigurer help ren", []string{"render"}},
		{"dnsconfigurer completion ", []string{"bash", "fish", "zsh"}},
		{"dnsconfigurer convert --output nosuchfile", nil},
	}
	path := completionPath(t)
	for _, shell := range completion.Shells {
		t.Run(shell, func(t *testing.T) {
			if _, err := exec.LookPath(shell); err != nil {
				t.Skipf("%s is not installed (apt-get install %s)", shell, shell)
			}
			for _, tc := range lines {
				got := completeIn(t, shell, path, tc.line)
				if !slices.Equal(got, tc.want) {
					t.Errorf("%s: %q completes to %q, want %q", shell, tc.line, got, tc.want)
				}
			}
		})
	}
}

func mustCompletionCommands(t *testing.T) []completion.Command {
	t.Helper()
	cmds, err := completionCommands(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cmds
}

// completionFlagsOf is the dashed flags of the subcommand name, sorted.
func completionFlagsOf(t *testing.T, name string) []string {
	t.Helper()
	var flags []string
	for _, c := range mustCompletionCommands(t) {
		if c.Name == name {
			for _, f := range c.Flags {
				flags = append(flags, f.Dashed())
			}
		}
	}
	slices.Sort(flags)
	return flags
}

// completionPath is $PATH with a dnsconfigurer first that runs this test
// binary as the command.
func completionPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\n" + childEnv + "=\"$(printf '%s\\n' \"$@\")\" exec " + shellQuote(os.Args[0]) + " -test.run='^TestCompletionShells$'\n"
	if err := os.WriteFile(filepath.Join(dir, "dnsconfigurer"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// completeShell loads the script and completes "$1" in each shell: bash
// through the function the script registers, zsh with its completion
// system on a pseudo-terminal, fish with complete -C.
var completeShell = map[string][]string{
	"bash": {"bash", "--norc", "--noprofile", "-c", `source <(dnsconfigurer completion bash) || exit 3
fn=$(complete -p dnsconfigurer | sed -nE 's/.* -F ([^ ]+) .*/\1/p')
[[ -n $fn ]] || exit 4
read -ra COMP_WORDS <<<"$1"
[[ $1 == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1)) COMP_LINE=$1 COMP_POINT=${#1}
"$fn" dnsconfigurer "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"`, "bash"},
	"zsh":  {"zsh", "-f", "testdata/completion/complete.zsh"},
	"fish": {"fish", "--no-config", "-c", `dnsconfigurer completion fish | source; and complete -C "$argv[1]"`},
}

// zshMatches are the matches complete.zsh prints, <<a|b>> a compadd call.
var zshMatches = regexp.MustCompile(`<<([^>]*)>>`)

// completeIn is what shell offers for line, sorted and without repeats.
func completeIn(t *testing.T, shell, path, line string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := completeShell[shell]
	cmd := exec.CommandContext(ctx, args[0], append(args[1:], line)...)
	cmd.Env = append(os.Environ(), "PATH="+path, "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: complete %q: %v\n%s", shell, line, err, out)
	}
	var got []string
	switch shell {
	case "zsh":
		for _, m := range zshMatches.FindAllStringSubmatch(string(out), -1) {
			got = append(got, strings.Split(m[1], "|")...)
		}
	case "fish":
		for l := range strings.Lines(string(out)) {
			word, _, _ := strings.Cut(strings.TrimSuffix(l, "\n"), "\t")
			got = append(got, word)
		}
	default:
		got = strings.Fields(string(out))
	}
	slices.Sort(got)
	return slices.Compact(got)
}
