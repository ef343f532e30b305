// Command gendeploy writes deploy/'s resource files from the Helm chart
// charts/dnsconfigurer (internal/gendeploy says which and how):
//
//	go run ./hack/gendeploy [-out DIR] [-check] [-helm PATH]
//
// Run it from the module's root after changing the chart. -check writes
// nothing and exits 1 when deploy/ differs, naming each file and its first
// differing line. The helm binary is -helm, else $DNSCONFIGURER_HELM, else
// the one test/testbin/helm.sh builds (the version test/deploy pins).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/internal/cmdline"
	"github.com/dnsconfigurer/dnsconfigurer/internal/gendeploy"
)

func main() { cmdline.Main(run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cmdline.NewFlagSet("gendeploy", stderr, "")
	root := fs.String("root", ".", "the module's root directory")
	out := fs.String("out", "", "write the files under this directory instead of ROOT/deploy")
	check := fs.Bool("check", false, "compare with the directory instead of writing; exit 1 when it differs")
	helm := fs.String("helm", os.Getenv("DNSCONFIGURER_HELM"), "the helm binary (default $DNSCONFIGURER_HELM, else test/testbin/helm.sh's)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "gendeploy: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	dir := *out
	if dir == "" {
		dir = filepath.Join(*root, gendeploy.DeployDir)
	}
	if *helm == "" {
		b, err := exec.CommandContext(ctx, "bash", filepath.Join(*root, "test/testbin/helm.sh")).Output()
		if err != nil {
			fmt.Fprintf(stderr, "gendeploy: no helm: set -helm or $DNSCONFIGURER_HELM (test/testbin/helm.sh: %v)\n", err)
			return 1
		}
		*helm = strings.TrimSpace(string(b))
	}
	files, err := gendeploy.Generate(ctx, *helm, *root)
	if err != nil {
		fmt.Fprintf(stderr, "gendeploy: %v\n", err)
		return 1
	}
	if *check {
		drifts, err := gendeploy.Compare(dir, files)
		if err != nil {
			fmt.Fprintf(stderr, "gendeploy: %v\n", err)
			return 1
		}
		if msg := gendeploy.Error(drifts); msg != "" {
			fmt.Fprint(stderr, msg)
			return 1
		}
		fmt.Fprintf(stdout, "%s: %d generated files up to date\n", dir, len(files))
		return 0
	}
	if err := gendeploy.Write(dir, files); err != nil {
		fmt.Fprintf(stderr, "gendeploy: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: wrote %d files\n", dir, len(files))
	return 0
}
