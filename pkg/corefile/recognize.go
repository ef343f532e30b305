package corefile

import (
	"bufio"
	"bytes"
	"context"
	"io/fs"
	"regexp"
	"strings"
)

// Recognize is the form of text when it is a DNS configuration convert
// reads: a Corefile, or a coredns, kube-dns or NodeLocal DNSCache
// ConfigMap (alone, in a manifest or a List). It is "" for anything else,
// a dnsconfigurer config file among them. ReadSource takes any text that
// is no YAML object for a Corefile; here a Corefile must also open with a
// server block ("example.org:53 {", a snippet), or parse into server
// blocks with CoreDNS's plugins. A broken YAML file is then not one.
func Recognize(ctx context.Context, name string, text []byte) Form {
	src, err := ReadSource(ctx, name, text)
	if _, unrendered := err.(*placeholderError); unrendered {
		// What it would be rendered: convert names the placeholder.
		src, err = ReadSource(ctx, name, unplaceheld(text))
	}
	switch {
	case err != nil:
		return ""
	case src.Form != FormCorefile:
		return src.Form
	case opensBlock(text):
		return FormCorefile
	}
	blocks, _, err := Parse(ctx, Input{Name: name, Text: text, Imports: noFiles{}})
	if err != nil {
		return ""
	}
	for _, b := range blocks {
		if len(b.Directives) > 0 {
			return FormCorefile
		}
	}
	// A word alone is a block's key without plugins.
	return ""
}

// blockKey is a server block's key: a zone with a port or a scheme
// (".:53", "dns://example.org", ":5353"), or a snippet's name.
const blockKey = `(([a-z0-9+]+://)?[A-Za-z0-9_*.-]*(:[0-9]+)?|\([^()\s]+\))`

// blockOpen is a line opening a server block: its keys and "{".
var blockOpen = regexp.MustCompile(`^` + blockKey + `([ \t,]+` + blockKey + `)*[ \t]*\{$`)

// opensBlock reports text whose first line with a token opens a server
// block.
func opensBlock(text []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		return line != "{" && blockOpen.MatchString(line)
	}
	return false
}

// noFiles has no file: a Corefile's imports are not read.
type noFiles struct{}

func (noFiles) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}
