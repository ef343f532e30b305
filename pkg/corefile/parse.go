package corefile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/coredns/caddy/caddyfile"
)

// Input is a Corefile and where its imports come from.
type Input struct {
	// Name labels the Corefile in findings and errors ("Corefile", or its
	// path). A relative import is resolved against its directory.
	Name string
	Text []byte
	// ImportDir, when set, holds the imported files: an import's directory
	// is replaced by it and only the file pattern kept. A ConfigMap's other
	// keys are written there (k3s's /etc/coredns/custom mount).
	ImportDir string
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

// plugins are CoreDNS's directives (plugin.cfg); any other name is a
// syntax error, as in CoreDNS.
var plugins = []string{
	"root", "metadata", "geoip", "cancel", "tls", "quic", "grpc_server", "https", "https3",
	"timeouts", "multisocket", "reload", "nsid", "bufsize", "bind", "debug", "trace", "ready",
	"health", "pprof", "prometheus", "errors", "log", "dnstap", "local", "dns64", "acl", "any",
	"chaos", "loadbalance", "tsig", "cache", "rewrite", "header", "dnssec", "autopath",
	"minimal", "template", "transfer", "hosts", "route53", "azure", "clouddns", "k8s_external",
	"kubernetes", "file", "auto", "secondary", "etcd", "loop", "forward", "grpc", "erratic",
	"whoami", "on", "sign", "view", "nomad",
}

// importLine is an import directive on a line of its own.
var importLine = regexp.MustCompile(`^(\s*)import\s+(\S+)\s*$`)

// Parse reads the server blocks of in. The findings are the file imports.
func Parse(in Input) ([]Block, []Finding, error) {
	if in.ImportDir != "" {
		abs, err := filepath.Abs(in.ImportDir)
		if err != nil {
			return nil, nil, fmt.Errorf("import dir: %w", err)
		}
		in.ImportDir = abs
	}
	text, found, err := resolveImports(in)
	if err != nil {
		return nil, nil, err
	}
	sbs, err := caddyfile.Parse(in.Name, bytes.NewReader(text), plugins)
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", in.Name, err)
	}
	blocks := make([]Block, 0, len(sbs))
	for _, sb := range sbs {
		blocks = append(blocks, in.block(sb))
	}
	return blocks, found, nil
}

// Bounds of what convert reads through imports: files matched, and bytes
// of each.
const (
	maxImportedFiles = 64
	maxImportBytes   = 1 << 20
)

var (
	// importToken is an import directive anywhere on a line.
	importToken = regexp.MustCompile(`(^|[\s{])import(\s|$)`)
	// snippetDef is a snippet's definition: "(name) {".
	snippetDef = regexp.MustCompile(`^\s*\(([^)\s]+)\)`)
)

// resolveImports points file imports at ImportDir and blanks those that
// match no file (CoreDNS only warns about them); line numbers stay. It
// reads no file outside its directory (ImportDir, else the Corefile's),
// refuses {$VAR} (CoreDNS fills it from its own environment, which convert
// does not have), and refuses imports inside imported files, so that
// nothing the Corefile names can make caddy open another file or import a
// file into itself.
func resolveImports(in Input) ([]byte, []Finding, error) {
	if err := checkEnv(in.Name, in.Text); err != nil {
		return nil, nil, err
	}
	snippets := snippetNames(in.Text)
	base := in.ImportDir
	if base == "" {
		abs, err := filepath.Abs(filepath.Dir(in.Name))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", in.Name, err)
		}
		base = abs
	}
	lines := strings.Split(string(in.Text), "\n")
	var found []Finding
	read := 0
	for i, l := range lines {
		where := fmt.Sprintf("%s:%d", in.Name, i+1)
		m := importLine.FindStringSubmatch(l)
		if m == nil {
			if importToken.MatchString(stripComment(l)) {
				return nil, nil, fmt.Errorf("%s: import: convert reads an import only on a line of its own", where)
			}
			continue
		}
		if snippets[m[2]] {
			continue
		}
		pattern := m[2]
		switch {
		case in.ImportDir != "":
			pattern = filepath.Join(in.ImportDir, filepath.Base(pattern))
		case !filepath.IsAbs(pattern):
			pattern = filepath.Join(base, pattern)
		}
		pattern = filepath.Clean(pattern)
		if !within(base, pattern) {
			lines[i] = ""
			found = append(found, Finding{where, "import", Dropped, fmt.Sprintf("%s: outside %s, not read; give the imported files in the Corefile's directory, or as keys of its ConfigMap", m[2], base)})
			continue
		}
		files, err := filepath.Glob(pattern)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: import %s: %w", where, m[2], err)
		}
		if len(files) == 0 && !strings.Contains(pattern, "*") {
			return nil, nil, fmt.Errorf("%s: import %s: file not found", where, m[2])
		}
		if len(files) == 0 {
			lines[i] = ""
			found = append(found, Finding{where, "import", Converted, fmt.Sprintf("%s matches no file", m[2])})
			continue
		}
		names := make([]string, len(files))
		for j, f := range files {
			if read++; read > maxImportedFiles {
				return nil, nil, fmt.Errorf("%s: import %s: more than %d files imported", where, m[2], maxImportedFiles)
			}
			if err := checkImported(in.label(f), f, snippets); err != nil {
				return nil, nil, err
			}
			names[j] = in.label(f)
		}
		lines[i] = m[1] + "import " + pattern
		found = append(found, Finding{where, "import", Converted, fmt.Sprintf("%s: %s", m[2], strings.Join(names, ", "))})
	}
	return []byte(strings.Join(lines, "\n")), found, nil
}

// checkImported reads an imported file (at most maxImportBytes) and
// refuses {$VAR} and any import in it but of a snippet.
func checkImported(label, path string, snippets map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("import %s: %w", label, err)
	}
	defer f.Close()
	text, err := io.ReadAll(io.LimitReader(f, maxImportBytes+1))
	if err != nil {
		return fmt.Errorf("import %s: %w", label, err)
	}
	if len(text) > maxImportBytes {
		return fmt.Errorf("import %s: over %d bytes", label, maxImportBytes)
	}
	if err := checkEnv(label, text); err != nil {
		return err
	}
	own := snippetNames(text)
	for i, l := range strings.Split(string(text), "\n") {
		if !importToken.MatchString(stripComment(l)) {
			continue
		}
		if m := importLine.FindStringSubmatch(l); m != nil && (snippets[m[2]] || own[m[2]]) {
			continue
		}
		return fmt.Errorf("%s:%d: import in an imported file: convert reads the Corefile's imports only (a file importing itself would never end); put its content in the Corefile or the imported file", label, i+1)
	}
	return nil
}

// checkEnv refuses {$VAR} and {%VAR%}: CoreDNS fills them from its own
// environment; convert does not read the environment of whoever runs it.
func checkEnv(name string, text []byte) error {
	for i, l := range strings.Split(string(text), "\n") {
		for _, open := range []string{"{$", "{%"} {
			if j := strings.Index(l, open); j >= 0 {
				v := l[j:]
				if k := strings.IndexByte(v, '}'); k >= 0 {
					v = v[:k+1]
				}
				return fmt.Errorf("%s:%d: %s: convert does not read environment variables (CoreDNS fills them from its own); write the value into the Corefile", name, i+1, v)
			}
		}
	}
	return nil
}

// snippetNames are the snippets text defines.
func snippetNames(text []byte) map[string]bool {
	names := map[string]bool{}
	for _, l := range strings.Split(string(text), "\n") {
		if m := snippetDef.FindStringSubmatch(l); m != nil {
			names[m[1]] = true
		}
	}
	return names
}

// stripComment is a line without its comment.
func stripComment(l string) string {
	if i := strings.IndexByte(l, '#'); i >= 0 {
		return l[:i]
	}
	return l
}

// within reports whether path is dir or under it.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// label names a token's file in findings: an imported file of ImportDir
// by its base name (the ConfigMap key).
func (in Input) label(file string) string {
	if in.ImportDir != "" && strings.HasPrefix(file, in.ImportDir+string(filepath.Separator)) {
		return filepath.Base(file)
	}
	return file
}

func (in Input) block(sb caddyfile.ServerBlock) Block {
	b := Block{Keys: sb.Keys}
	for _, toks := range sb.Tokens {
		d := caddyfile.NewDispenserTokens(in.Name, toks)
		for d.Next() {
			dir := Directive{Name: d.Val(), Where: in.where(&d)}
			dir.Args = d.RemainingArgs()
			for d.NextBlock() {
				o := Option{Name: d.Val(), Where: in.where(&d)}
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
		b.Where = in.keyLine(b.Directives[0].Where, b.Keys)
	} else if len(b.Keys) > 0 {
		b.Where = in.keyLine(fmt.Sprintf("%s:%d", in.Name, strings.Count(string(in.Text), "\n")+1), b.Keys)
	}
	return b
}

// keyLine finds the line of a block's keys: the last line before its
// first directive that holds the first key. Caddy keeps no key lines.
func (in Input) keyLine(first string, keys []string) string {
	file, line := splitWhere(first)
	text := in.Text
	if file != in.Name {
		path := file
		if in.ImportDir != "" && !filepath.IsAbs(file) {
			path = filepath.Join(in.ImportDir, file)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return first
		}
		text = b
	}
	lines := strings.Split(string(text), "\n")
	for i := min(line-1, len(lines)) - 1; i >= 0 && len(keys) > 0; i-- {
		if strings.Contains(lines[i], keys[0]) {
			return fmt.Sprintf("%s:%d", file, i+1)
		}
	}
	return first
}

func (in Input) where(d *caddyfile.Dispenser) string {
	return fmt.Sprintf("%s:%d", in.label(d.File()), d.Line())
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
