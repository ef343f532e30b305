package apiserver

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// EnvBinDir names the environment variable that points at a directory
// holding the kube-apiserver and etcd binaries, overriding the cache lookup.
const EnvBinDir = "DNSCONFIGURER_TESTBIN"

// ErrNoBinaries reports that kube-apiserver or etcd was not found. Tests skip
// on it; see Require and StartT.
var ErrNoBinaries = errors.New("apiserver: kube-apiserver and etcd not built; run test/testbin/build.sh (and export " + EnvBinDir + " if you gave it OUTDIR)")

// binaries are the two executables BinDir must find.
var binaries = []string{"kube-apiserver", "etcd"}

// BinDir returns the directory holding kube-apiserver and etcd: the one named
// by $DNSCONFIGURER_TESTBIN when set, otherwise the directory build.sh uses
// for the current test/testbin/go.sum. It returns an error wrapping
// ErrNoBinaries when a binary is missing there.
func BinDir() (string, error) {
	dir := os.Getenv(EnvBinDir)
	if dir == "" {
		var err error
		dir, err = cacheDir()
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoBinaries, err)
		}
	}
	for _, name := range binaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoBinaries, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%w: %q is not an executable", ErrNoBinaries, filepath.Join(dir, name))
		}
	}
	return dir, nil
}

// cacheDir mirrors build.sh's default output directory:
// ${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/testbin/<sha256 of go.sum>.
func cacheDir() (string, error) {
	sum, err := findGoSum()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(sum)
	if err != nil {
		return "", fmt.Errorf("read testbin go.sum: %w", err)
	}
	h := sha256.Sum256(b)
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find cache directory: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "dnsconfigurer", "testbin", hex.EncodeToString(h[:])), nil
}

// findGoSum locates test/testbin/go.sum. go test runs each package in its
// own directory, so it walks up from the working directory; when that fails
// (a test binary run from elsewhere) it tries the path this file was
// compiled from.
func findGoSum() (string, error) {
	const rel = "test/testbin/go.sum"
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			p := filepath.Join(dir, filepath.FromSlash(rel))
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("%s not found above the working directory", rel)
}
