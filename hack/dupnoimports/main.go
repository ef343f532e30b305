// Command dupnoimports runs the duplicates tool over a copy of the work
// tree whose Go import lines are blank: the files duplicates reads in a
// checkout, tracked ones and new ones git does not ignore.
//
//	go run ./hack/dupnoimports [duplicates flags]
//
// The tool's README says import lines are passed over, but in Go it skips
// only lines that start with "import": the paths inside an import block
// count, so two files with the same six imports in a row make a pair.
// This command blanks every line of an import block and every single-line
// import, keeping the line numbers, then runs duplicates in the copy with
// the flags given (default: --seconds 300 --most 200). Run it from the
// repository's root. The pairs with no test on either side:
//
//	go run ./hack/dupnoimports | grep '^D[0-9]' | grep -v -e _test.go -e ' test/' -e testdata -e testkit
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "dupnoimports:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	// The files duplicates reads in a checkout: tracked ones and new ones
	// git does not ignore.
	out, err := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	dir, err := os.MkdirTemp("", "dupnoimports-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, path := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if err := copyFile(path, filepath.Join(dir, path)); err != nil {
			return err
		}
	}
	if len(args) == 0 {
		args = []string{"--seconds", "300", "--most", "200"}
	}
	cmd := exec.Command("duplicates", args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stdout, os.Stderr
	return cmd.Run()
}

// copyFile copies src to dst, blanking the import lines of a Go file.
// A tracked link is left out, as duplicates leaves out a file behind a
// link; so is a file deleted in the work tree.
func copyFile(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if strings.HasSuffix(src, ".go") {
		b = blankImports(b)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// blankImports empties every line of an import declaration.
func blankImports(b []byte) []byte {
	var out bytes.Buffer
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case in:
			in = line != ")"
		case strings.HasPrefix(line, "import ("):
			in = true
		case strings.HasPrefix(line, "import "):
		default:
			out.WriteString(sc.Text())
		}
		out.WriteByte('\n')
	}
	return out.Bytes()
}
