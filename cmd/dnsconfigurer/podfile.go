package main

import (
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"

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
