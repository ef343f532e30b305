package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/corefile"
)

// exitDropped is convert's exit code when a directive was dropped.
const exitDropped = 3

type convertFlags struct {
	format, output, configMap, namespace, importDir string
}

const convertUsage = `usage: dnsconfigurer convert [-o yaml|json] [--output FILE] [--configmap NAME [--namespace NS]] [--import-dir DIR] FILE|-

FILE (- for stdin) is one of, as YAML or JSON where it is a ConfigMap:
  a Corefile;
  a coredns ConfigMap (data.Corefile; its other keys are the files its imports read);
  a kube-dns ConfigMap (data.stubDomains, data.upstreamNameservers);
  NodeLocal DNSCache's ConfigMap (node-local-dns), converted to a mode: node-local config;
  a manifest of several documents, a kubectl get -o yaml List or a kubectl edit
  fragment (data: / Corefile: |) holding one of these ConfigMaps: the one named
  coredns is taken when there are several, and the report's first line says which;
  AKS's and k3s's coredns-custom ConfigMap, in the same input as the coredns one,
  for the files its imports read (alone it is refused).
The ServerConfiguration (with --configmap: the ConfigMap holding it) goes to
stdout, or to --output FILE, as -o asks: yaml (the default) or json. The report
goes to stderr, one line a directive. Exit 0: all converted (differences
allowed); 3: something was dropped; 1: the input is invalid; 2: bad flags or
unreadable input.`

func runConvert(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("convert", stderr, convertUsage)
	var f convertFlags
	fs.StringVar(&f.format, "o", outYAML, "output format: yaml or json")
	fs.StringVar(&f.output, "output", "", "write the result to `FILE` instead of stdout")
	fs.StringVar(&f.configMap, "configmap", "", "wrap it in a ConfigMap of this name, key "+corefile.ConfigKey)
	fs.StringVar(&f.namespace, "namespace", "kube-system", "the ConfigMap's namespace (with --configmap)")
	fs.StringVar(&f.importDir, "import-dir", "", "directory of the files a Corefile imports (default: the import's own directory; for a ConfigMap, its other keys)")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if err := checkConvertFormat(f.format); err != nil {
		return usageExit(stderr, "convert", err)
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

// checkConvertFormat checks -o. Before it was the format, -o was the
// output file: a value that looks like a path says where that went.
func checkConvertFormat(format string) error {
	err := checkOutput(format, outYAML, outJSON)
	if err == nil {
		return nil
	}
	if _, statErr := os.Stat(format); statErr == nil || strings.ContainsAny(format, "/.") {
		return fmt.Errorf("%w; -o is the output format: to write a file use --output FILE", err)
	}
	return err
}

// write prints the result as -o asks, to --output or stdout. YAML starts
// with a comment naming the input; JSON has no comments. The ConfigMap's
// config.yaml is YAML either way.
func (f *convertFlags) write(r corefile.Result, from string, stdout io.Writer) error {
	var cfg bytes.Buffer
	if err := writeOutput(&cfg, outYAML, r.Config); err != nil {
		return err
	}
	head := "# converted by `dnsconfigurer convert` from " + from + "\n"
	var v any = r.Config
	out := append([]byte(head), cfg.Bytes()...)
	if f.configMap != "" {
		cm, err := r.ConfigMap(f.configMap, f.namespace, string(out))
		if err != nil {
			return err
		}
		out = append([]byte(head), cm...)
		if err := yaml.Unmarshal(cm, &v); err != nil {
			return fmt.Errorf("decode the configmap: %w", err)
		}
	}
	if f.format == outJSON {
		var b bytes.Buffer
		if err := writeOutput(&b, outJSON, v); err != nil {
			return err
		}
		out = b.Bytes()
	}
	if f.output == "" {
		_, err := stdout.Write(out)
		return err
	}
	return os.WriteFile(f.output, out, 0o644)
}
