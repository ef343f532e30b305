package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/corefile"
)

// exitDropped is convert's exit code when a directive was dropped.
const exitDropped = 3

// configMapKey is the key of the converted file in --configmap output.
const configMapKey = "config.yaml"

type convertFlags struct {
	out, configMap, namespace, importDir string
}

func runConvert(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f convertFlags
	fs.StringVar(&f.out, "o", "", "write the ServerConfiguration to FILE instead of stdout")
	fs.StringVar(&f.configMap, "configmap", "", "wrap it in a ConfigMap of this name, key "+configMapKey)
	fs.StringVar(&f.namespace, "namespace", "kube-system", "the ConfigMap's namespace (with --configmap)")
	fs.StringVar(&f.importDir, "import-dir", "", "directory of the files a Corefile imports (default: the import's own directory; for a ConfigMap, its other keys)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dnsconfigurer convert [-o FILE] [--configmap NAME [--namespace NS]] [--import-dir DIR] FILE|-")
		fmt.Fprintln(stderr, "\nFILE is a Corefile, a coredns ConfigMap (data.Corefile) or a kube-dns ConfigMap\n(data.stubDomains, data.upstreamNameservers). The report goes to stderr, one line\na directive. Exit 0: all converted (differences allowed); 3: something was\ndropped; 1: the input is invalid; 2: bad flags or unreadable input.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "convert: want one input file (or - for stdin)")
		return exitUsage
	}
	name, text, err := readInput(fs.Arg(0), stdin)
	if err != nil {
		fmt.Fprintf(stderr, "convert: %v\n", err)
		return exitUsage
	}
	r, err := convertInput(name, text, f.importDir)
	if err != nil {
		fmt.Fprintf(stderr, "convert: %v\n", err)
		return exitFail
	}
	if err := f.write(r, name, stdout); err != nil {
		fmt.Fprintf(stderr, "convert: %v\n", err)
		return exitUsage
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

// convertInput converts a Corefile or a ConfigMap (coredns or kube-dns).
func convertInput(name string, text []byte, importDir string) (corefile.Result, error) {
	data, isCM, err := corefile.ConfigMapData(text)
	switch {
	case err != nil:
		return corefile.Result{}, fmt.Errorf("%s: %w", name, err)
	case !isCM:
		return corefile.Run(corefile.Input{Name: name, Text: text, ImportDir: importDir}, nil)
	case corefile.IsKubeDNS(data):
		return corefile.KubeDNS(data)
	}
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
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return corefile.Run(corefile.Input{Name: "Corefile", Text: []byte(data["Corefile"]), ImportDir: importDir}, keys)
}

// convertedConfigMap is the ConfigMap --configmap writes.
type convertedConfigMap struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   map[string]string `json:"metadata"`
	Data       map[string]string `json:"data"`
}

func (f *convertFlags) write(r corefile.Result, from string, stdout io.Writer) error {
	b, err := yaml.Marshal(r.Config)
	if err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	head := "# converted by `dnsconfigurer convert` from " + from + "\n"
	if f.configMap != "" {
		cm := convertedConfigMap{APIVersion: "v1", Kind: "ConfigMap",
			Metadata: map[string]string{"name": f.configMap, "namespace": f.namespace},
			Data:     map[string]string{configMapKey: head + string(b)}}
		if b, err = yaml.Marshal(cm); err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
	}
	out := append([]byte(head), b...)
	if f.out == "" {
		_, err = stdout.Write(out)
		return err
	}
	return os.WriteFile(f.out, out, 0o644)
}
