package nriplugin

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// Modes of the state directories and files: directories traversable by
// the remapped root of user-namespaced pods, files readable by it.
const (
	dirMode  fs.FileMode = 0o711
	fileMode fs.FileMode = 0o644
)

// fileName is the pod file's name in its directory.
const fileName = "resolv.conf"

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

// PodFile is the path of the pod's file under stateDir.
func PodFile(stateDir, uid string) string { return filepath.Join(stateDir, uid, fileName) }

// writePod makes <state dir>/<uid>/resolv.conf hold data and returns its
// path and whether it changed; p.mu must be held. A new file is written
// atomically; a file with the same content is left alone; another content
// is written in place, so that the containers already bound to the file
// see it.
func (p *Plugin) writePod(uid string, data []byte) (string, bool, error) {
	if err := validUID(uid); err != nil {
		return "", false, err
	}
	dir := filepath.Join(p.stateDir, uid)
	if err := mkdir(p.stateDir); err != nil {
		return "", false, err
	}
	if err := mkdir(dir); err != nil {
		return "", false, err
	}
	path := filepath.Join(dir, fileName)
	old, _, err := safefile.Read(path, maxSandboxFile)
	switch {
	case err == nil && bytes.Equal(old, data):
		return path, false, nil
	case err == nil:
		return path, true, writeInPlace(path, data)
	case errors.Is(err, fs.ErrNotExist):
		return path, true, writeAtomic(dir, path, data)
	default:
		return "", false, fmt.Errorf("pod file: %w", err)
	}
}

// mkdir creates dir with dirMode, or sets the mode of an existing one.
func mkdir(dir string) error {
	if err := os.Mkdir(dir, dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("state dir: %w", err)
	}
	if err := os.Chmod(dir, dirMode); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	return nil
}

// writeAtomic writes data to a temporary file in dir and renames it to
// path.
func writeAtomic(dir, path string, data []byte) error {
	tmp, err := os.CreateTemp(dir, "."+fileName+".*")
	if err != nil {
		return fmt.Errorf("pod file: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	err = errors.Join(werr, cerr)
	if err == nil {
		err = os.Chmod(tmp.Name(), fileMode)
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

// writeInPlace truncates path and writes data in one write: the inode, and
// with it every bind mount of the file, stays.
func writeInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("pod file %q: %w", path, err)
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("pod file %q: %w", path, err)
	}
	return nil
}

// removePod removes the pod's state directory.
func (p *Plugin) removePod(uid string) error {
	if err := validUID(uid); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, uid)
	return os.RemoveAll(filepath.Join(p.stateDir, uid))
}

// prune removes every entry of the state dir that is not the directory of
// a pod in keep (by UID), and returns how many it removed.
func (p *Plugin) prune(keep map[string]bool) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	entries, err := os.ReadDir(p.stateDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	for uid := range p.running {
		if !keep[uid] {
			delete(p.running, uid)
		}
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
