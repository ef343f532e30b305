package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/manifest"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
)

// readPod reads the -f argument: a path, or "-" for stdin.
func readPod(path string, stdin io.Reader) (*corev1.Pod, error) {
	if path == "" {
		return nil, fmt.Errorf("-f is required: a pod manifest file, or - for stdin")
	}
	var r io.Reader = stdin
	name := "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("-f: %w", err)
		}
		defer f.Close()
		r, name = f, path
	}
	pod, err := podspec.Decode(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	podspec.Default(pod)
	return pod, nil
}

// fileList is a repeatable -f.
type fileList []string

func (l *fileList) String() string { return strings.Join(*l, ",") }

func (l *fileList) Set(v string) error {
	if v == "" {
		return errors.New("empty file name")
	}
	*l = append(*l, v)
	return nil
}

// inputFlags are the manifest inputs of render and validate, as kubectl
// apply takes them.
type inputFlags struct {
	files     fileList
	recursive bool
	// keep says which kinds hold pod templates (default
	// podspec.HasTemplate); other objects are read without their JSON.
	keep func(kind string) bool
}

func (i *inputFlags) register(fs *flag.FlagSet) {
	fs.Var(&i.files, "f", "manifest file or directory (YAML or JSON; any workload kind, Lists, several documents), - for stdin; repeatable")
	fs.BoolVar(&i.recursive, "R", false, "with -f DIR: also read its subdirectories (.yaml, .yml and .json files)")
}

// single is the one file -f names, "" for stdin or several.
func (i *inputFlags) single() string {
	if len(i.files) == 1 && i.files[0] != manifest.Stdin {
		return i.files[0]
	}
	return ""
}

// manifests is what inputFlags read.
type manifests struct {
	objs  []manifest.Object
	files int
	// pod is the one Pod of a single-Pod input, decoded strictly as
	// before multi-object input existed; nil otherwise.
	pod *corev1.Pod
}

// read reads every -f within manifest.DefaultLimits.
func (i *inputFlags) read(ctx context.Context, stdin io.Reader) (manifests, error) {
	if len(i.files) == 0 {
		return manifests{}, usagef("-f is required: a manifest file or directory, or - for stdin")
	}
	lim := manifest.DefaultLimits
	lim.MaxObjectSize = podspec.MaxManifestSize
	keep := i.keep
	if keep == nil {
		keep = podspec.HasTemplate
	}
	r := manifest.Reader{Limits: lim, Recursive: i.recursive, Stdin: stdin, Keep: keep}
	objs, files, err := r.Read(ctx, i.files)
	if err != nil {
		return manifests{}, err
	}
	m := manifests{objs: objs, files: files}
	if len(i.files) == 1 && files == 1 && len(objs) == 1 && objs[0].Kind == "Pod" && objs[0].Item < 0 && objs[0].Err == nil {
		if _, err := podspec.Templates("Pod", objs[0].JSON); err != nil {
			return m, nil // a field of the wrong type: a finding at its line
		}
		pod, err := podspec.DecodeBytes(objs[0].JSON)
		if err != nil {
			return manifests{}, &manifest.Error{Source: objs[0].Source, Err: err}
		}
		podspec.Default(pod)
		m.pod = pod
	}
	return m, nil
}

// commandFlags are the flags render and validate share: the node's
// settings, the manifests, -o and --explain.
type commandFlags struct {
	node    nodeFlags
	input   inputFlags
	out     string
	explain bool
}

func (f *commandFlags) register(fs *flag.FlagSet, out, outHelp, explainHelp string) {
	f.node.register(fs)
	f.input.register(fs)
	fs.StringVar(&f.out, "o", out, outHelp)
	fs.BoolVar(&f.explain, "explain", false, explainHelp)
}

// parse parses args and checks -o, one of outs; false, with the exit
// code, when the command ends there (the error printed).
func (f *commandFlags) parse(fs *flag.FlagSet, args []string, outs ...string) (int, bool) {
	if code, ok := parseCommand(fs, args); !ok {
		return code, false
	}
	if err := checkOutput(f.out, outs...); err != nil {
		return usageExit(fs.Output(), fs.Name(), err), false
	}
	return exitOK, true
}

// read reads the manifests; false, with the exit code, when the command
// ends there (the error printed). --explain takes a single Pod.
func (f *commandFlags) read(ctx context.Context, fs *flag.FlagSet, stdin io.Reader) (manifests, int, bool) {
	m, err := f.input.read(ctx, stdin)
	if err == nil && f.explain && f.whole(m) {
		err = errors.New("--explain takes a single Pod")
	}
	if ctx.Err() != nil {
		fmt.Fprintf(fs.Output(), "%s: stopped: %v\n", fs.Name(), ctx.Err())
		return manifests{}, exitFail, false
	}
	if err != nil {
		return manifests{}, usageExit(fs.Output(), fs.Name(), err), false
	}
	return m, exitOK, true
}

// whole tells whether m is taken as a whole, one result per pod template,
// rather than as the single Pod it may be: several objects, or -o sarif
// (a report of findings).
func (f *commandFlags) whole(m manifests) bool { return m.pod == nil || f.out == outSARIF }
