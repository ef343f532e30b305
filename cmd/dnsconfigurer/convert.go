package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/corefile"
)

// exitDropped is convert's exit code when a directive was dropped.
const exitDropped = 3

type convertFlags struct {
	out, configMap, namespace, importDir string
}

func runConvert(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("convert", stderr, "usage: dnsconfigurer convert [-o FILE] [--configmap NAME [--namespace NS]] [--import-dir DIR] FILE|-\n"+
		"\nFILE is a Corefile, a coredns ConfigMap (data.Corefile) or a kube-dns ConfigMap\n(data.stubDomains, data.upstreamNameservers). The report goes to stderr, one line\na directive. Exit 0: all converted (differences allowed); 3: something was\ndropped; 1: the input is invalid; 2: bad flags or unreadable input.")
	var f convertFlags
	fs.StringVar(&f.out, "o", "", "write the ServerConfiguration to FILE instead of stdout")
	fs.StringVar(&f.configMap, "configmap", "", "wrap it in a ConfigMap of this name, key "+corefile.ConfigKey)
	fs.StringVar(&f.namespace, "namespace", "kube-system", "the ConfigMap's namespace (with --configmap)")
	fs.StringVar(&f.importDir, "import-dir", "", "directory of the files a Corefile imports (default: the import's own directory; for a ConfigMap, its other keys)")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "convert: want one input file (or - for stdin)")
		return exitUsage
	}
	name, text, err := readInput(fs.Arg(0), stdin)
	if err != nil {
		return usageExit(stderr, "convert", err)
	}
	r, err := convertInput(name, text, f.importDir, f.configMap != "")
	if err != nil {
		fmt.Fprintf(stderr, "convert: %v\n", err)
		return exitFail
	}
	if err := checkStarts(ctx, r.Config); err != nil {
		fmt.Fprintf(stderr, "convert: the converted configuration does not start (a bug of convert; please report it with the input): %v\n", err)
		return exitFail
	}
	if err := f.write(r, name, stdout); err != nil {
		return usageExit(stderr, "convert", err)
	}
	if err := corefile.WriteReport(stderr, r.Findings); err != nil {
		return exitUsage
	}
	if corefile.AnyDropped(r.Findings) {
		return exitDropped
	}
	return exitOK
}

func readInput(path string, stdin io.Reader) (string, []byte, error) {
	if path == "-" {
		b, err := io.ReadAll(io.LimitReader(stdin, 10<<20))
		return "Corefile", b, err
	}
	b, err := os.ReadFile(path)
	return path, b, err
}

// convertInput converts a Corefile or the DNS ConfigMap of an input
// (coredns, kube-dns; corefile.ReadSource finds it in a manifest, a List
// or a fragment); toConfigMap carries a hosts file that is a key of the
// input ConfigMap into the output ConfigMap.
func convertInput(name string, text []byte, importDir string, toConfigMap bool) (corefile.Result, error) {
	src, err := corefile.ReadSource(name, text)
	if err != nil {
		return corefile.Result{}, err
	}
	r, err := convertSource(name, src, importDir, toConfigMap)
	if err == nil && src.Taken != "" {
		r.Findings = append([]corefile.Finding{{Where: name, Plugin: "input", Status: corefile.Converted, Reason: src.Taken}}, r.Findings...)
	}
	return r, err
}

func convertSource(name string, src corefile.Source, importDir string, toConfigMap bool) (corefile.Result, error) {
	switch src.Form {
	case corefile.FormCorefile:
		return corefile.Run(corefile.Input{Name: name, Text: src.Text, ImportDir: importDir}, nil)
	case corefile.FormKubeDNS:
		return corefile.KubeDNS(src.Data)
	case corefile.FormNodeLocal:
		return corefile.NodeLocal(corefile.Input{Name: "Corefile", Text: []byte(src.Data["Corefile"])})
	}
	data := src.Data
	if importDir == "" {
		dir, err := os.MkdirTemp("", "dnsconfigurer-convert-")
		if err != nil {
			return corefile.Result{}, err
		}
		defer os.RemoveAll(dir)
		if err := corefile.WriteImports(dir, data); err != nil {
			return corefile.Result{}, err
		}
		importDir = dir
	}
	return corefile.Run(corefile.Input{Name: "Corefile", Text: []byte(data["Corefile"]), ImportDir: importDir},
		&corefile.ConfigMapKeys{Data: data, Carry: toConfigMap, CheckKey: validation.IsConfigMapKey})
}

func (f *convertFlags) write(r corefile.Result, from string, stdout io.Writer) error {
	b, err := yaml.Marshal(r.Config)
	if err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	head := "# converted by `dnsconfigurer convert` from " + from + "\n"
	if f.configMap != "" {
		if b, err = r.ConfigMap(f.configMap, f.namespace, head+string(b)); err != nil {
			return err
		}
	}
	out := append([]byte(head), b...)
	if f.out == "" {
		_, err = stdout.Write(out)
		return err
	}
	return os.WriteFile(f.out, out, 0o644)
}
