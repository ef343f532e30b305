package corefile

import (
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// KeysFS is a ConfigMap's data as the files its Corefile's imports read:
// each key but Corefile is a file at the root, as the kubelet mounts the
// ConfigMap (k3s's and AKS's /etc/coredns/custom). It lives in memory
// only. A key that is not a file name is an error. The result implements
// fs.GlobFS and fs.ReadFileFS.
func KeysFS(data map[string]string) (fs.FS, error) {
	for k := range data {
		if strings.ContainsAny(k, `/\`) || k == "." || k == ".." || k == "" {
			return nil, keyError{fmt.Errorf("configmap key %q: not a file name", k)}
		}
	}
	return &keysFS{data: data}, nil
}

type keysFS struct {
	data  map[string]string
	names []string // the files, sorted; made by the first ReadDir
}

// file reports whether name is one of the files.
func (k *keysFS) file(name string) bool {
	_, ok := k.data[name]
	return ok && name != "Corefile"
}

func (k *keysFS) list() []string {
	if k.names == nil {
		k.names = make([]string, 0, len(k.data))
		for name := range k.data {
			if k.file(name) {
				k.names = append(k.names, name)
			}
		}
		slices.Sort(k.names)
	}
	return k.names
}

// Glob matches the root's files only: a ConfigMap has no directories. It
// sorts the matches only, not every key (a 400,000-key ConfigMap).
func (k *keysFS) Glob(pattern string) ([]string, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, err
	}
	if !strings.ContainsAny(pattern, `*?[\`) {
		if k.file(pattern) {
			return []string{pattern}, nil
		}
		return nil, nil
	}
	var out []string
	for name := range k.data {
		if ok, _ := path.Match(pattern, name); ok && k.file(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (k *keysFS) ReadFile(name string) ([]byte, error) {
	if !k.file(name) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return []byte(k.data[name]), nil
}

func (k *keysFS) Open(name string) (fs.File, error) {
	switch {
	case name == ".":
		return &keysDir{fs: k}, nil
	case !k.file(name):
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &keyFile{info: keyInfo{name: name, size: int64(len(k.data[name]))}, r: strings.NewReader(k.data[name])}, nil
}

// keyFile is an open key.
type keyFile struct {
	info keyInfo
	r    *strings.Reader
}

func (f *keyFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *keyFile) Read(p []byte) (int, error) { return f.r.Read(p) }
func (f *keyFile) Close() error               { return nil }

// keysDir is the open root.
type keysDir struct {
	fs  *keysFS
	off int
}

func (d *keysDir) Stat() (fs.FileInfo, error) { return keyInfo{name: ".", dir: true}, nil }
func (d *keysDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: ".", Err: fs.ErrInvalid}
}
func (d *keysDir) Close() error { return nil }

func (d *keysDir) ReadDir(n int) ([]fs.DirEntry, error) {
	names := d.fs.list()[d.off:]
	if n > 0 && len(names) > n {
		names = names[:n]
	}
	if n > 0 && len(names) == 0 {
		return nil, io.EOF
	}
	out := make([]fs.DirEntry, len(names))
	for i, name := range names {
		out[i] = fs.FileInfoToDirEntry(keyInfo{name: name, size: int64(len(d.fs.data[name]))})
	}
	d.off += len(names)
	return out, nil
}

// keyInfo describes a key, or the root.
type keyInfo struct {
	name string
	size int64
	dir  bool
}

func (i keyInfo) Name() string       { return i.name }
func (i keyInfo) Size() int64        { return i.size }
func (i keyInfo) ModTime() time.Time { return time.Time{} }
func (i keyInfo) IsDir() bool        { return i.dir }
func (i keyInfo) Sys() any           { return nil }

func (i keyInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
