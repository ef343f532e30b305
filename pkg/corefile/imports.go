package corefile

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/coredns/caddy/caddyfile"
)

// Bounds of what convert reads through imports: import lines, files
// matched, and bytes of each.
const (
	maxImports       = 64
	maxImportedFiles = 64
	maxImportBytes   = 1 << 20
)

// bom is the byte order mark caddy's lexer drops at the start of a file.
var bom = []byte("\uFEFF")

var (
	// importLine is an import directive on a line of its own.
	importLine = regexp.MustCompile(`^(\s*)import\s+(\S+)\s*$`)
	// importToken is an import directive anywhere on a line.
	importToken = regexp.MustCompile(`(^|[\s{])import(\s|$)`)
	// snippetDef is a snippet's definition: "(name) {".
	snippetDef = regexp.MustCompile(`^\s*\(([^)\s]+)\)`)
	// caddyWhere is the place a caddy error starts with.
	caddyWhere = regexp.MustCompile(`^(.*):(\d+) - `)
)

// spliced is a Corefile with the files it imports in place of its import
// lines, as caddy splices their tokens. Caddy parses it, so caddy opens no
// file: the imports come from Input.Imports, in memory for a ConfigMap.
type spliced struct {
	name string // the Corefile's
	text []byte
	// at is where each line of text comes from: at[i] is line i+1.
	at []place
	// files are the imported files' texts, by label; lines, theirs and
	// the Corefile's split into lines, as keyLine needs them.
	files map[string]string
	lines map[string][]string
}

// place is a file (its label) and a line in it.
type place struct {
	file string
	line int
}

func (sp *spliced) add(text, file string) {
	if strings.HasSuffix(text, "\n") {
		text = text[:len(text)-1]
	}
	for i, l := range strings.Split(text, "\n") {
		sp.text = append(append(sp.text, l...), '\n')
		sp.at = append(sp.at, place{file, i + 1})
	}
}

// line is one line of the Corefile itself.
func (sp *spliced) line(l string, n int) {
	sp.text = append(append(sp.text, l...), '\n')
	sp.at = append(sp.at, place{sp.name, n})
}

// where is the file and line of line n of the spliced text.
func (sp *spliced) where(n int) string {
	if n < 1 || n > len(sp.at) {
		return fmt.Sprintf("%s:%d", sp.name, n)
	}
	p := sp.at[n-1]
	return fmt.Sprintf("%s:%d", p.file, p.line)
}

// relabel gives a caddy error the file and line its place has, in front
// ("Corefile:3: Error during parsing: ..."): caddy puts "FILE:LINE - "
// there, for the spliced text.
func (sp *spliced) relabel(msg string) string {
	m := caddyWhere.FindStringSubmatch(msg)
	switch {
	case m == nil:
		return sp.name + ":1: " + msg
	case m[1] != sp.name:
		return m[1] + ":" + m[2] + ": " + msg[len(m[0]):]
	}
	n, _ := strconv.Atoi(m[2])
	return sp.where(n) + ": " + msg[len(m[0]):]
}

// importRoot is where in's imports read files: Imports, else the
// Corefile's directory (base, whose files are labelled by their path).
func (in Input) importRoot() (fsys fs.FS, base string, err error) {
	if in.Imports != nil {
		return in.Imports, "", nil
	}
	base, err = filepath.Abs(filepath.Dir(in.Name))
	if err != nil {
		return nil, "", fmt.Errorf("%s:1: the directory of its imports: %w", in.Name, err)
	}
	return os.DirFS(base), base, nil
}

// splice puts the files each import line matches in its place, and blanks
// an import that matches no file (CoreDNS only warns about it). It reads
// no file outside its root (Imports, else the Corefile's directory),
// refuses {$VAR} (CoreDNS fills it from its own environment, which convert
// does not have), and refuses imports inside imported files, so that a
// file cannot import itself. It stops with ctx's error when ctx ends.
func splice(ctx context.Context, in Input) (*spliced, []Finding, error) {
	if err := checkEnv(in.Name, in.Text); err != nil {
		return nil, nil, err
	}
	fsys, base, err := in.importRoot()
	if err != nil {
		return nil, nil, err
	}
	sp := &spliced{name: in.Name, files: map[string]string{}, lines: map[string][]string{}}
	snippets := snippetNames(in.Text)
	globbed := map[string][]string{}
	var found []Finding
	read, imports := 0, 0
	for i, l := range strings.Split(string(in.Text), "\n") {
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		where := fmt.Sprintf("%s:%d", in.Name, i+1)
		m := importLine.FindStringSubmatch(l)
		if m == nil {
			if importToken.MatchString(stripComment(l)) {
				return nil, nil, fmt.Errorf("%s: import: convert reads an import only on a line of its own", where)
			}
			sp.line(l, i+1)
			continue
		}
		if snippets[m[2]] {
			sp.line(l, i+1)
			continue
		}
		if imports++; imports > maxImports {
			return nil, nil, fmt.Errorf("%s: more than %d imports", where, maxImports)
		}
		pattern, label, ok := in.importPattern(m[2], base)
		if !ok {
			sp.line("", i+1)
			root := base
			if root == "" {
				root = "the import directory"
			}
			found = append(found, Finding{where, "import", Dropped, fmt.Sprintf("%s: outside %s, not read; give the imported files in the Corefile's directory, or as keys of its ConfigMap", m[2], root)})
			continue
		}
		if strings.Count(pattern, "*") > 1 || strings.Count(pattern, "?") > 1 || strings.Contains(pattern, "[") && strings.Contains(pattern, "]") {
			return nil, nil, fmt.Errorf("%s: import %s: Glob pattern may only contain one wildcard (*), but has others (CoreDNS refuses it)", where, m[2])
		}
		files, ok := globbed[pattern]
		if !ok {
			if files, err = fs.Glob(fsys, pattern); err != nil {
				return nil, nil, fmt.Errorf("%s: import %s: %w", where, m[2], err)
			}
			globbed[pattern] = files
		}
		if len(files) == 0 && !strings.Contains(pattern, "*") {
			return nil, nil, fmt.Errorf("%s: import %s: file not found", where, m[2])
		}
		if len(files) == 0 {
			sp.line("", i+1)
			found = append(found, Finding{where, "import", Converted, fmt.Sprintf("%s matches no file", m[2])})
			continue
		}
		names := make([]string, len(files))
		for j, f := range files {
			if read++; read > maxImportedFiles {
				return nil, nil, fmt.Errorf("%s: import %s: more than %d files imported", where, m[2], maxImportedFiles)
			}
			names[j] = label(f)
			text, err := readImported(fsys, f, names[j], where)
			if err != nil {
				return nil, nil, err
			}
			if err := checkImported(names[j], text, snippets); err != nil {
				return nil, nil, err
			}
			sp.files[names[j]] = text
			sp.add(text, names[j])
		}
		found = append(found, Finding{where, "import", Converted, fmt.Sprintf("%s: %s", m[2], strings.Join(names, ", "))})
	}
	return sp, found, nil
}

// importPattern is an import's pattern within its root, and how a file
// it matches is labelled: with Imports, the file name only (the import's
// directory is where the ConfigMap is mounted), labelled by it (the key);
// else the path from the Corefile's directory, labelled by its full path.
// ok is false when the pattern leaves the root.
func (in Input) importPattern(arg, base string) (pattern string, label func(string) string, ok bool) {
	if in.Imports != nil {
		pattern = filepath.ToSlash(filepath.Base(arg))
		return pattern, func(f string) string { return f }, fs.ValidPath(pattern) && pattern != "."
	}
	p := arg
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	p = filepath.Clean(p)
	rel, err := filepath.Rel(base, p)
	if err != nil || !within(base, p) {
		return "", nil, false
	}
	label = func(f string) string { return filepath.Join(base, filepath.FromSlash(f)) }
	return filepath.ToSlash(rel), label, true
}

// readImported reads an imported file, at most maxImportBytes, without
// the byte order mark caddy's lexer drops.
// where is the import line's place.
func readImported(fsys fs.FS, name, label, where string) (string, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return "", fmt.Errorf("%s: import %s: %w", where, label, err)
	}
	defer f.Close()
	text, err := io.ReadAll(io.LimitReader(f, maxImportBytes+1))
	if err != nil {
		return "", fmt.Errorf("%s: import %s: %w", where, label, err)
	}
	if len(text) > maxImportBytes {
		return "", fmt.Errorf("%s: import %s: over %d bytes", where, label, maxImportBytes)
	}
	return string(bytes.TrimPrefix(text, bom)), nil
}

// checkImported refuses {$VAR} and any import in an imported file but of
// a snippet.
func checkImported(label, text string, snippets map[string]bool) error {
	if err := checkEnv(label, []byte(text)); err != nil {
		return err
	}
	own := snippetNames([]byte(text))
	for i, l := range strings.Split(text, "\n") {
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

// checkImportTokens refuses an import token caddy would open a file for:
// one whose argument is not a snippet defined by then. The line rules of
// splice miss what only the lexer sees, such as a quoted "import". A
// snippet's body is checked where it is imported, as caddy expands it.
func (sp *spliced) checkImportTokens() error {
	c := importCheck{sp: sp, bodies: map[string][2]int{}, checked: map[string]bool{}}
	d := caddyfile.NewDispenser(sp.name, bytes.NewReader(sp.text))
	for d.Next() {
		c.toks = append(c.toks, d.Val())
		c.lines = append(c.lines, d.Line())
	}
	depth := 0
	for i := 0; i < len(c.toks); i++ {
		if name, end, ok := c.snippet(i, depth); ok {
			c.bodies[name] = [2]int{i + 2, end}
			i = end
			continue
		}
		switch c.toks[i] {
		case "{":
			depth++
		case "}":
			depth--
		}
		if err := c.check(i); err != nil {
			return err
		}
	}
	return nil
}

// importCheck is the state of checkImportTokens: the tokens, their lines,
// and the snippets defined so far, each with its body's token range.
type importCheck struct {
	sp      *spliced
	toks    []string
	lines   []int
	bodies  map[string][2]int
	checked map[string]bool
}

// snippet reports a snippet's definition at token i, as caddy takes one:
// "(name)" alone as a top-level block's key, then "{"; end is its "}".
func (c *importCheck) snippet(i, depth int) (name string, end int, ok bool) {
	t := c.toks[i]
	if depth != 0 || len(t) <= 2 || t[0] != '(' || t[len(t)-1] != ')' || i > 0 && c.toks[i-1] != "}" || i+1 == len(c.toks) || c.toks[i+1] != "{" {
		return "", 0, false
	}
	n := 0
	for end = i + 1; end < len(c.toks); end++ {
		switch c.toks[end] {
		case "{":
			n++
		case "}":
			n--
		}
		if n == 0 {
			break
		}
	}
	return t[1 : len(t)-1], end, true
}

// check refuses token i if it imports anything but a defined snippet,
// then checks that snippet's body once.
func (c *importCheck) check(i int) error {
	if c.toks[i] != "import" || i+1 == len(c.toks) || c.lines[i+1] != c.lines[i] {
		return nil // not an import, or one caddy refuses for its missing argument
	}
	arg := c.toks[i+1]
	body, ok := c.bodies[arg]
	if !ok {
		return fmt.Errorf("%s: import %s: not a snippet defined above it, and convert reads an import only on a line of its own", c.sp.where(c.lines[i]), arg)
	}
	if c.checked[arg] {
		return nil
	}
	c.checked[arg] = true
	for j := body[0]; j < body[1]; j++ {
		if err := c.check(j); err != nil {
			return err
		}
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
