package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/corefile"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/startcheck"
)

// exitDropped is convert's exit code when a directive was dropped.
const exitDropped = 3

type convertFlags struct {
	format, output, configMap, namespace, importDir string
	// helmValues: write the chart's values (dns.config, dns.files).
	helmValues bool
}

var convertUsage = fmt.Sprintf(`usage: dnsconfigurer convert [-o yaml|json] [--output FILE] [--configmap NAME [--namespace NS] | --helm-values] [--import-dir DIR] FILE|-

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
A ConfigMap is read in memory, nothing written to disk; an input is at most
%d MiB and %d ConfigMap keys.
The ServerConfiguration goes to stdout, or to --output FILE, as -o asks: yaml
(the default) or json; with --configmap, the ConfigMap holding it; with
--helm-values, charts/dnsconfigurer's values dns.config and dns.files (helm
install -f). Both carry a hosts file that is a key of the input ConfigMap
(k3s's NodeHosts) and point hosts.file at %s/KEY, where the
ConfigMap is mounted. The report goes to stderr, one line a directive.
Exit 0: all converted (differences allowed); 3: something was dropped; 1: the
input is invalid, or SIGTERM or SIGINT stopped convert (nothing written); 2:
bad flags or unreadable input.`,
	corefile.MaxInputBytes>>20, corefile.MaxKeys, corefile.MountDir)

func runConvert(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("convert", stderr, convertUsage)
	var f convertFlags
	fs.StringVar(&f.format, "o", outYAML, "output format: yaml or json")
	fs.StringVar(&f.output, "output", "", "write the result to `FILE` instead of stdout")
	fs.StringVar(&f.configMap, "configmap", "", "wrap it in a ConfigMap of this name, key "+corefile.ConfigKey)
	fs.StringVar(&f.namespace, "namespace", "kube-system", "the ConfigMap's namespace (with --configmap)")
	fs.BoolVar(&f.helmValues, "helm-values", false, "write charts/dnsconfigurer's values instead: dns.config and dns.files (helm install -f)")
	fs.StringVar(&f.importDir, "import-dir", "", "directory of the files a Corefile imports (default: the import's own directory; for a ConfigMap, its other keys)")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if err := f.check(); err != nil {
		return usageExit(stderr, "convert", err)
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "convert: want one input file (or - for stdin)")
		return exitUsage
	}
	c, stopped := convertStoppable(ctx, fs.Arg(0), &f, stdin)
	if stopped == nil && c.readErr == nil && c.err == nil {
		c.checkErr, stopped = startcheck.Run(ctx, c.r.Config)
	}
	if stopped != nil {
		fmt.Fprintf(stderr, "convert: stopped (%v): nothing written\n", stopped)
		return exitFail
	}
	switch {
	case c.readErr != nil:
		return usageExit(stderr, "convert", c.readErr)
	case c.err != nil:
		fmt.Fprintf(stderr, "convert: %v\n", c.err)
		return exitFail
	case c.checkErr != nil:
		fmt.Fprintf(stderr, "convert: the converted configuration does not start (a bug of convert; please report it with the input): %v\n", c.checkErr)
		return exitFail
	case f.helmValues && c.r.Config.Mode == v1alpha1.ModeNodeLocal:
		fmt.Fprintln(stderr, "convert: --helm-values: the input is NodeLocal DNSCache's, a node-local configuration; dns.config is the cluster DNS's: convert the coredns ConfigMap")
		return exitFail
	}
	if err := f.write(c.r, c.name, stdout); err != nil {
		return usageExit(stderr, "convert", err)
	}
	if err := corefile.WriteReport(stderr, c.r.Findings); err != nil {
		return exitUsage
	}
	if corefile.AnyDropped(c.r.Findings) {
		return exitDropped
	}
	return exitOK
}

// conversion is what convert read and made of it.
type conversion struct {
	name string
	r    corefile.Result
	// readErr: the input is unreadable; err: it is invalid; checkErr: its
	// conversion does not start (startcheck.Run).
	readErr, err, checkErr error
}

// convertStoppable reads and converts the input, in memory, on its own
// goroutine, so that SIGTERM or SIGINT (ctx) stops convert within a second
// even inside a read of stdin or the decoding of one large document. The
// work left behind writes nothing and ends with the process. stopped is
// the cause when ctx ends first.
func convertStoppable(ctx context.Context, path string, f *convertFlags, stdin io.Reader) (c conversion, stopped error) {
	done := make(chan conversion, 1)
	go func() {
		var c conversion
		var text []byte
		if c.name, text, c.readErr = readInput(path, stdin); c.readErr == nil {
			c.r, c.err = convertInput(ctx, c.name, text, f)
		}
		done <- c
	}()
	select {
	case c := <-done:
		if ctx.Err() != nil {
			return conversion{}, context.Cause(ctx)
		}
		return c, nil
	case <-ctx.Done():
		return conversion{}, context.Cause(ctx)
	}
}

// readInput reads the input file, or stdin for "-", up to one byte over
// corefile.MaxInputBytes (ReadSource refuses more).
func readInput(path string, stdin io.Reader) (string, []byte, error) {
	name, in := "Corefile", stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return path, nil, err
		}
		defer f.Close()
		name, in = path, f
	}
	b, err := io.ReadAll(io.LimitReader(in, corefile.MaxInputBytes+1))
	return name, b, err
}

// convertInput converts a Corefile or the DNS ConfigMap of an input
// (corefile.ConvertInput). --configmap and --helm-values (f) carry a hosts
// file that is a key of the input ConfigMap into the output; with
// --import-dir, imports read its files rather than the ConfigMap's keys.
func convertInput(ctx context.Context, name string, text []byte, f *convertFlags) (corefile.Result, error) {
	var imports fs.FS
	if f.importDir != "" {
		imports = os.DirFS(f.importDir)
	}
	keys := corefile.ConfigMapKeys{Carry: f.configMap != "" || f.helmValues, Helm: f.helmValues, CheckKey: validation.IsConfigMapKey}
	return corefile.ConvertInput(ctx, name, text, imports, keys)
}

// check checks the flags: -o, and one output form.
func (f *convertFlags) check() error {
	if f.configMap != "" && f.helmValues {
		return errors.New("--configmap and --helm-values: pick one")
	}
	return checkConvertFormat(f.format)
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
// config.yaml, and dns.config, are YAML either way.
func (f *convertFlags) write(r corefile.Result, from string, stdout io.Writer) error {
	var cfg bytes.Buffer
	if err := writeOutput(&cfg, outYAML, r.Config); err != nil {
		return err
	}
	head := "# converted by `dnsconfigurer convert` from " + from + "\n"
	var v any = r.Config
	out := append([]byte(head), cfg.Bytes()...)
	if wrapped, err := f.wrap(r, string(out)); err != nil {
		return err
	} else if wrapped != nil {
		out = append([]byte(head), wrapped...)
		if err := yaml.Unmarshal(wrapped, &v); err != nil {
			return fmt.Errorf("decode the output: %w", err)
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

// wrap is the ConfigMap (--configmap) or the chart's values
// (--helm-values) holding config; nil for neither.
func (f *convertFlags) wrap(r corefile.Result, config string) ([]byte, error) {
	switch {
	case f.configMap != "":
		return r.ConfigMap(f.configMap, f.namespace, config)
	case f.helmValues:
		return r.HelmValues(config)
	}
	return nil, nil
}
