package nriplugin

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/containerd/nri/pkg/api"

	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// Modes of the state directories and files: directories traversable by
// the remapped root of user-namespaced pods, the pod file readable by it,
// the pod's facts (recordName) root's only.
const (
	dirMode    fs.FileMode = 0o711
	fileMode   fs.FileMode = 0o644
	recordMode fs.FileMode = 0o600
)

// fileName is the pod file's name in its directory.
const fileName = "resolv.conf"

// maxSandboxes bounds the sandboxes the plugin tracks between two
// Synchronize events; past it RemovePodSandbox removes no directory.
const maxSandboxes = 4 * DefaultMaxPods

func formatConfig(res policy.Result) string { return resolvconf.Format(res.Config()) }

// validUID accepts a pod UID as a single path element: kubelet's UIDs are
// RFC 4122 strings and static pods' config hashes (hex).
func validUID(uid string) error {
	if uid == "" || len(uid) > 128 {
		return fmt.Errorf("pod uid %q: want 1 to 128 characters", uid)
	}
	for _, c := range uid {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
		if !ok {
			return fmt.Errorf("pod uid %q: only letters, digits, '-' and '_' are allowed", uid)
		}
	}
	return nil
}

// PodFile is the path of the pod's file under stateDir. Every sandbox of
// a pod (kubelet makes a new one when the old one dies) binds it.
func PodFile(stateDir, uid string) string { return filepath.Join(stateDir, uid, fileName) }

// podDir makes <state dir>/<uid> (uid checked) and returns its path.
func (p *Plugin) podDir(uid string) (string, error) {
	if err := validUID(uid); err != nil {
		return "", err
	}
	if err := mkdir(p.stateDir); err != nil {
		return "", err
	}
	dir := filepath.Join(p.stateDir, uid)
	return dir, mkdir(dir)
}

// writePod makes <state dir>/<uid>/resolv.conf hold data and returns its
// path and whether it changed; p.mu must be held. A new file is written
// atomically; a file with the same content is left alone; another content
// is written in place, so that the containers already bound to the file
// see it.
func (p *Plugin) writePod(uid string, data []byte) (string, bool, error) {
	dir, err := p.podDir(uid)
	if err != nil {
		return "", false, err
	}
	path := filepath.Join(dir, fileName)
	old, err := readStateFile(path)
	switch {
	case err == nil && bytes.Equal(old, data):
		return path, false, nil
	case err == nil:
		return path, true, writeInPlace(path, data)
	case errors.Is(err, fs.ErrNotExist):
		return path, true, writeAtomic(dir, path, data, fileMode)
	default:
		return "", false, fmt.Errorf("pod file: %w", err)
	}
}

// mkdir creates dir with dirMode, or sets the mode of an existing
// directory; anything else there (a symbolic link, a file) is an error.
func mkdir(dir string) error {
	if err := os.Mkdir(dir, dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("state dir: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("state dir %q: not a directory (%s)", dir, kind(fi.Mode()))
	}
	if err := os.Chmod(dir, dirMode); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	return nil
}

// kind names a file's type for an error.
func kind(m fs.FileMode) string {
	if m&fs.ModeSymlink != 0 {
		return "a symbolic link"
	}
	if m.IsRegular() {
		return "a regular file"
	}
	return safefile.Kind(m)
}

// readStateFile reads a file of the state dir, at most maxSandboxFile
// bytes, refusing a symbolic link or anything but a regular file.
func readStateFile(path string) ([]byte, error) {
	f, err := openNoFollow(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %q: %w (%s)", path, safefile.ErrNotRegular, kind(fi.Mode()))
	}
	if fi.Size() > maxSandboxFile {
		return nil, fmt.Errorf("read %q: %w (%d bytes), at most %d", path, safefile.ErrTooLarge, fi.Size(), maxSandboxFile)
	}
	data, err := safefile.ReadAtMost(f, maxSandboxFile, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", path, err)
	}
	return data, nil
}

// writeAtomic writes data to a temporary file in dir and renames it to
// path.
func writeAtomic(dir, path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("pod file: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	err = errors.Join(werr, cerr)
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("pod file %q: %w", path, err)
	}
	return nil
}

// writeInPlace makes path hold data and keeps its inode: every bind mount
// of the file pins it. No reader sees an empty or cut file. A longer
// content reserves its space first (a full disk fails there, the old
// content intact), then overwrites the file in one write. A shorter one is
// written padded with newlines to the old length, then the file is cut to
// data's length: a reader in between sees the new config and blank lines,
// which resolvers skip, never a tail of the old one.
func writeInPlace(path string, data []byte) error {
	f, err := openNoFollow(path, os.O_WRONLY)
	if err != nil {
		return fmt.Errorf("pod file: %w", err)
	}
	err = rewrite(f, data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pod file %q: %w", path, err)
	}
	return nil
}

// rewrite is writeInPlace on an open file.
func rewrite(f *os.File, data []byte) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w (%s)", safefile.ErrNotRegular, kind(fi.Mode()))
	}
	size, n := fi.Size(), int64(len(data))
	buf := data
	switch {
	case n > size:
		if err := reserve(f, n); err != nil {
			return fmt.Errorf("reserving %d bytes: %w", n, err)
		}
	case n < size:
		buf = make([]byte, size)
		copy(buf, data)
		for i := n; i < size; i++ {
			buf[i] = '\n'
		}
	}
	if _, err := f.WriteAt(buf, 0); err != nil {
		return err
	}
	if n < size {
		return f.Truncate(n)
	}
	return nil
}

// track records that sandbox id of pod uid may bind the pod's file; p.mu
// must be held. Past maxSandboxes it records nothing and marks the plugin
// untracked, so RemovePodSandbox leaves directories to Synchronize. (A
// sandbox without an id never gets the file: sandboxResolvConf.)
func (p *Plugin) track(id, uid string) {
	if id == "" {
		return
	}
	if _, ok := p.sandboxes[id]; !ok && len(p.sandboxes) >= maxSandboxes {
		p.untracked = true
		return
	}
	p.sandboxes[id] = uid
}

// removeSandbox forgets sandbox id of pod uid and, when no other sandbox
// of the pod is known, removes the pod's state directory. It reports
// whether it did.
func (p *Plugin) removeSandbox(id, uid string) (bool, error) {
	if err := validUID(uid); err != nil {
		return false, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.sandboxes, id)
	if p.untracked {
		return false, nil
	}
	for _, other := range p.sandboxes {
		if other == uid {
			return false, nil
		}
	}
	delete(p.running, uid)
	return true, os.RemoveAll(filepath.Join(p.stateDir, uid))
}

// prune removes every entry of the state dir that is not the directory of
// a pod in pods (the runtime's, by UID), tracks exactly their sandboxes,
// and returns how many entries it removed; p.mu must be held.
func (p *Plugin) prune(pods []*api.PodSandbox) (int, error) {
	clear(p.sandboxes)
	p.untracked = false
	keep := make(map[string]bool, len(pods))
	for _, pod := range pods {
		if uid := pod.GetUid(); validUID(uid) == nil {
			p.track(pod.GetId(), uid)
			keep[uid] = true
		}
	}
	for uid := range p.running {
		if !keep[uid] {
			delete(p.running, uid)
		}
	}
	entries, err := os.ReadDir(p.stateDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, e := range entries {
		if e.IsDir() && keep[e.Name()] {
			continue
		}
		delete(p.running, e.Name())
		if err := os.RemoveAll(filepath.Join(p.stateDir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}
