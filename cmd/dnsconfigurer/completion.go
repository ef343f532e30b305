package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"unicode/utf8"
)

// shells are the shells completion writes a script for.
var shells = []string{"bash", "zsh", "fish"}

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
	if fs.NArg() != 1 || !slices.Contains(shells, fs.Arg(0)) {
		return usageExit(stderr, "completion", fmt.Errorf("want one shell: %s", strings.Join(shells, ", ")))
	}
	cmds, err := completionCommands(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "completion: %v\n", err)
		return exitFail
	}
	if err := completionScripts.ExecuteTemplate(stdout, fs.Arg(0), cmds); err != nil {
		fmt.Fprintf(stderr, "completion: %v\n", err)
		return exitFail
	}
	return exitOK
}

// completionCommand is what a script completes after a subcommand.
type completionCommand struct {
	Name, Summary string
	Flags         []completionFlag
	// Words are its arguments when they are words, not files: help's
	// subcommands, completion's shells.
	Words []string
}

// completionFlag is one flag of a subcommand.
type completionFlag struct {
	Name  string // without dashes
	Usage string // its first line, shortened
	Value bool   // takes a value (not a bool flag)
}

// Dashed is the flag as the scripts offer it: -x, or --name for a long
// one (the flag package takes either form).
func (f completionFlag) Dashed() string {
	if len(f.Name) == 1 {
		return "-" + f.Name
	}
	return "--" + f.Name
}

// FlagList is its flags, dashed, space-separated; ValueFlags those that
// take a value.
func (c completionCommand) FlagList() string   { return c.flags(false) }
func (c completionCommand) ValueFlags() string { return c.flags(true) }

func (c completionCommand) flags(valued bool) string {
	var w []string
	for _, f := range c.Flags {
		if f.Value || !valued {
			w = append(w, f.Dashed())
		}
	}
	return strings.Join(w, " ")
}

// flagSets is a stderr that discards the usage and keeps the flag sets.
type flagSets struct{ sets []*flag.FlagSet }

func (r *flagSets) Write(p []byte) (int, error)  { return len(p), nil }
func (r *flagSets) recordFlags(fs *flag.FlagSet) { r.sets = append(r.sets, fs) }

// safeWord is what a name in the scripts may be: no quoting needed.
var safeWord = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// completionCommands are the subcommands with the flags each defines,
// read by running it with -h, and help.
func completionCommands(ctx context.Context) ([]completionCommand, error) {
	names := slices.Sorted(maps.Keys(commands))
	cmds := []completionCommand{{Name: "help", Summary: "print the usage, or a subcommand's", Words: names}}
	for _, name := range names {
		rec := &flagSets{}
		code := commands[name].run(ctx, []string{"-h"}, strings.NewReader(""), io.Discard, rec)
		if code != exitOK || len(rec.sets) != 1 {
			return nil, fmt.Errorf("read the flags of %s: exit %d, %d flag sets", name, code, len(rec.sets))
		}
		c := completionCommand{Name: name, Summary: commands[name].summary}
		if name == "completion" {
			c.Words = shells
		}
		var bad []string
		rec.sets[0].VisitAll(func(f *flag.Flag) {
			if !safeWord.MatchString(f.Name) {
				bad = append(bad, f.Name)
			}
			c.Flags = append(c.Flags, newCompletionFlag(f))
		})
		if !safeWord.MatchString(name) || len(bad) > 0 {
			return nil, fmt.Errorf("subcommand %q: names the scripts cannot hold: %q", name, bad)
		}
		cmds = append(cmds, c)
	}
	slices.SortFunc(cmds, func(a, b completionCommand) int { return strings.Compare(a.Name, b.Name) })
	return cmds, nil
}

// maxFlagUsage bounds a flag's description in the zsh and fish menus.
const maxFlagUsage = 72

func newCompletionFlag(f *flag.Flag) completionFlag {
	_, usage := flag.UnquoteUsage(f)
	usage, _, _ = strings.Cut(usage, "\n")
	if len(usage) > maxFlagUsage {
		cut := strings.LastIndexByte(usage[:maxFlagUsage], ' ')
		if cut <= 0 { // one long word: cut it at a rune
			cut = maxFlagUsage
			for !utf8.RuneStart(usage[cut]) {
				cut--
			}
		}
		usage = usage[:cut] + "..."
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return completionFlag{Name: f.Name, Usage: usage, Value: !ok || !b.IsBoolFlag()}
}

// completionScripts are the scripts, one template a shell. Each names the
// subcommands and flags and leaves files to the shell.
var completionScripts = template.Must(template.New("").Funcs(template.FuncMap{
	"join": func(w []string) string { return strings.Join(w, " ") },
	"names": func(cmds []completionCommand) string {
		var w []string
		for _, c := range cmds {
			w = append(w, c.Name)
		}
		return strings.Join(w, " ")
	},
	// zq single-quotes s for zsh.
	"zq": func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" },
	// zarg escapes s for an _arguments description, between [ and ].
	"zarg": strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`).Replace,
	// fq single-quotes s for fish.
	"fq": func(s string) string { return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'" },
}).Parse(bashCompletion + zshCompletion + fishCompletion))

const bashCompletion = `{{define "bash"}}# bash completion for dnsconfigurer, generated by ` + "`dnsconfigurer completion bash`" + `
# from its subcommands and their flags. Load it with
#   source <(dnsconfigurer completion bash)
_dnsconfigurer() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd="" i
	for ((i = 1; i < COMP_CWORD; i++)); do
		if [[ ${COMP_WORDS[i]} != -* ]]; then
			cmd=${COMP_WORDS[i]}
			break
		fi
	done
	local words="" flags="" valued=""
	case $cmd in
	"") words="{{names .}}" flags="-h --help --version" ;;
{{- range .}}
	{{.Name}}) words="{{join .Words}}" flags="{{.FlagList}}" valued="{{.ValueFlags}}" ;;
{{- end}}
	esac
	if [[ -n $cmd && " $valued " == *" $prev "* ]]; then
		COMPREPLY=() # a flag's value: bash's default completion (files)
	elif [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$flags" -- "$cur")
	elif [[ -n $words ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
	else
		COMPREPLY=() # an argument: bash's default completion (files)
	fi
}
complete -o bashdefault -o default -F _dnsconfigurer dnsconfigurer
{{end}}`

const zshCompletion = `{{define "zsh"}}#compdef dnsconfigurer
# zsh completion for dnsconfigurer, generated by ` + "`dnsconfigurer completion zsh`" + `
# from its subcommands and their flags. Load it with
#   source <(dnsconfigurer completion zsh)
# after compinit, or save it as _dnsconfigurer in a directory of $fpath.
_dnsconfigurer() {
	local -a subcommands specs
	subcommands=(
{{- range .}}
		{{zq (print .Name ":" .Summary)}}
{{- end}}
	)
	if (( CURRENT == 2 )); then
		_describe -t subcommands 'dnsconfigurer subcommand' subcommands
		return
	fi
	case ${words[2]} in
{{- range .}}
	{{.Name}})
{{- if .Words}}
		compadd -- {{join .Words}}
		return
		;;
{{- else}}
		specs=(
{{- range .Flags}}
			{{zq (print "*" .Dashed "[" (zarg .Usage) "]")}}{{if .Value}}':value:_files'{{end}}
{{- end}}
		)
		;;
{{- end}}
{{- end}}
	esac
	shift words
	(( CURRENT-- ))
	_arguments -S $specs '*:file:_files'
}
if [[ $funcstack[1] == _dnsconfigurer ]]; then
	_dnsconfigurer "$@"
else
	compdef _dnsconfigurer dnsconfigurer
fi
{{end}}`

const fishCompletion = `{{define "fish"}}# fish completion for dnsconfigurer, generated by ` + "`dnsconfigurer completion fish`" + `
# from its subcommands and their flags. Load it with
#   dnsconfigurer completion fish | source
# or save it as ~/.config/fish/completions/dnsconfigurer.fish.
complete -c dnsconfigurer -e
complete -c dnsconfigurer -n __fish_use_subcommand -f
complete -c dnsconfigurer -n __fish_use_subcommand -s h -l help -d 'print the usage'
complete -c dnsconfigurer -n __fish_use_subcommand -l version -d 'print the version'
{{- range .}}
complete -c dnsconfigurer -n __fish_use_subcommand -a {{.Name}} -d {{fq .Summary}}
{{- end}}
{{- range $c := .}}
{{- if .Words}}
complete -c dnsconfigurer -n '__fish_seen_subcommand_from {{.Name}}' -f -a {{fq (join .Words)}}
{{- end}}
{{- range .Flags}}
complete -c dnsconfigurer -n '__fish_seen_subcommand_from {{$c.Name}}' {{if eq (len .Name) 1}}-s{{else}}-l{{end}} {{.Name}}{{if .Value}} -r{{end}} -d {{fq .Usage}}
{{- end}}
{{- end}}
{{end}}`
