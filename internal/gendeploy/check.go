package gendeploy

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Write writes files under dir (deploy/ or a directory standing for it).
func Write(dir string, files map[string][]byte) error {
	for p, b := range files {
		path := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}

// A Drift is a file of dir that is not what Generate makes.
type Drift struct {
	// Path is under deploy/.
	Path string
	// Line is the first line that differs (1-based), Have dir's and Want
	// the generated one; a missing line is "(end of file)".
	Line       int
	Have, Want string
	// Missing: dir has no such file. Stale: dir's file says it is
	// generated, but nothing generates it.
	Missing, Stale bool
}

func (d Drift) String() string {
	p := DeployDir + "/" + d.Path
	switch {
	case d.Missing:
		return p + ": missing"
	case d.Stale:
		return p + ": has the generated header, but hack/gendeploy no longer writes it (delete it)"
	}
	return fmt.Sprintf("%s:%d: have %q, want %q", p, d.Line, d.Have, d.Want)
}

// Compare compares every generated file with dir's, byte for byte, and
// finds dir's files that claim to be generated but are not.
func Compare(dir string, files map[string][]byte) ([]Drift, error) {
	var drifts []Drift
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		have, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if os.IsNotExist(err) {
			drifts = append(drifts, Drift{Path: p, Missing: true})
			continue
		}
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(have, files[p]) {
			d := firstDiff(string(have), string(files[p]))
			d.Path = p
			drifts = append(drifts, d)
		}
	}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if _, ok := files[rel]; ok {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.HasPrefix(b, []byte(Header)) {
			drifts = append(drifts, Drift{Path: rel, Stale: true})
		}
		return nil
	})
	return drifts, err
}

// firstDiff finds the first line where have and want differ.
func firstDiff(have, want string) Drift {
	h, w := lines(have), lines(want)
	for i := 0; ; i++ {
		hl, wl := "(end of file)", "(end of file)"
		if i < len(h) {
			hl = h[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if hl != wl {
			return Drift{Line: i + 1, Have: strings.TrimSuffix(hl, "\n"), Want: strings.TrimSuffix(wl, "\n")}
		}
	}
}

// Error is the message of a comparison that found drifts, "" without.
func Error(drifts []Drift) string {
	if len(drifts) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d file(s) of deploy/ differ from what hack/gendeploy makes of charts/dnsconfigurer; "+
		"edit the chart, not deploy/, and regenerate: %s\n", len(drifts), Command)
	for _, d := range drifts {
		b.WriteString("  " + d.String() + "\n")
	}
	return b.String()
}

// lines splits s after each newline, without the empty rest of a final one.
func lines(s string) []string {
	l := strings.SplitAfter(s, "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}
