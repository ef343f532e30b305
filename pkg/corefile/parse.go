package corefile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"

	"github.com/coredns/caddy/caddyfile"
)

// Input is a Corefile and where its imports come from.
type Input struct {
	// Name labels the Corefile in findings and errors ("Corefile", or its
	// path). Without Imports, a relative import is resolved against its
	// directory.
	Name string
	Text []byte
	// Imports, when set, holds the imported files: an import's directory
	// is replaced by its root and only the file pattern kept, as where a
	// ConfigMap is mounted. A ConfigMap's other keys are one (KeysFS);
	// convert --import-dir is os.DirFS.
	Imports fs.FS
}

// Block is one server block: its keys ("zone:port") and directives in
// the order of the input.
type Block struct {
	Where      string
	Keys       []string
	Directives []Directive
}

// Directive is one plugin line with its block of options.
type Directive struct {
	Name    string
	Where   string
	Args    []string
	Options []Option
}

// Option is a line of a directive's block.
type Option struct {
	Name  string
	Where string
	Args  []string
}

// plugins are CoreDNS 1.15's directives (plugin.cfg, in its order); any other name is a
// syntax error, as in CoreDNS, but for the out-of-tree plugins convert knows (outOfTree).
var plugins = []string{
	"root", "metadata", "geoip", "cancel", "proxyproto", "quic", "grpc_server", "https", "https3",
	"timeouts", "multisocket", "reload", "nsid", "bufsize", "bind", "debug", "trace", "ready",
	"health", "pprof", "shed", "prometheus", "errors", "log", "dnstap", "local", "dns64", "siit",
	"any", "chaos", "loadbalance", "tsig", "rewrite", "autopath", "acl", "cache", "header",
	"dnssec", "tls", "minimal", "template", "transfer", "dynupdate", "hosts", "route53", "azure",
	"clouddns", "k8s_external", "kubernetes", "file", "auto", "secondary", "etcd", "loop",
	"forward", "grpc", "erratic", "whoami", "on", "sign", "view", "nomad",
}

// Parse reads the server blocks of in. The findings are the file imports.
// Caddy parses the Corefile with its imports spliced in (splice), so that
// it opens no file. Parse stops with ctx's error when ctx ends.
func Parse(ctx context.Context, in Input) ([]Block, []Finding, error) {
	in.Text = bytes.TrimPrefix(in.Text, bom)
	sp, found, err := splice(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	if err := sp.checkImportTokens(); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	sbs, err := caddyfile.Parse(in.Name, bytes.NewReader(sp.text), append(slices.Clip(plugins), outOfTree...))
	if err != nil {
		return nil, nil, errors.New(sp.relabel(err.Error()))
	}
	blocks := make([]Block, 0, len(sbs))
	for _, sb := range sbs {
		blocks = append(blocks, sp.block(in, sb))
	}
	return blocks, found, nil
}

func (sp *spliced) block(in Input, sb caddyfile.ServerBlock) Block {
	b := Block{Keys: sb.Keys}
	for _, toks := range sb.Tokens {
		d := caddyfile.NewDispenserTokens(in.Name, toks)
		for d.Next() {
			dir := Directive{Name: d.Val(), Where: sp.where(d.Line())}
			dir.Args = d.RemainingArgs()
			for d.NextBlock() {
				o := Option{Name: d.Val(), Where: sp.where(d.Line())}
				o.Args = d.RemainingArgs()
				dir.Options = append(dir.Options, o)
			}
			b.Directives = append(b.Directives, dir)
		}
	}
	sort.SliceStable(b.Directives, func(i, j int) bool {
		return lessWhere(b.Directives[i].Where, b.Directives[j].Where, in.Name)
	})
	b.Where = in.Name
	if len(b.Directives) > 0 {
		b.Where = sp.keyLine(in, b.Directives[0].Where, b.Keys)
	} else if len(b.Keys) > 0 {
		b.Where = sp.keyLine(in, fmt.Sprintf("%s:%d", in.Name, strings.Count(string(in.Text), "\n")+1), b.Keys)
	}
	return b
}

// keyLine finds the line of a block's keys: the last line before its
// first directive that holds the first key. Caddy keeps no key lines.
func (sp *spliced) keyLine(in Input, first string, keys []string) string {
	file, line := splitWhere(first)
	lines, ok := sp.lines[file]
	if !ok {
		text, ok := sp.files[file]
		if file == in.Name {
			text, ok = string(in.Text), true
		}
		if !ok {
			return first
		}
		lines = strings.Split(text, "\n")
		sp.lines[file] = lines // split once: a Corefile may have 20,000 blocks
	}
	for i := min(line-1, len(lines)) - 1; i >= 0 && len(keys) > 0; i-- {
		if strings.Contains(lines[i], keys[0]) {
			return fmt.Sprintf("%s:%d", file, i+1)
		}
	}
	return first
}

// lessWhere orders "file:line": the main file first, then by name and line.
func lessWhere(a, b, main string) bool {
	fa, la := splitWhere(a)
	fb, lb := splitWhere(b)
	if fa != fb {
		if fa == main || fb == main {
			return fa == main
		}
		return fa < fb
	}
	return la < lb
}

func splitWhere(w string) (string, int) {
	i := strings.LastIndex(w, ":")
	if i < 0 {
		return w, 0
	}
	var n int
	fmt.Sscanf(w[i+1:], "%d", &n)
	return w[:i], n
}
