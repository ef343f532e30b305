package cluster

import (
	"bufio"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/dnsconfigurer/dnsconfigurer/internal/imagebuild"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// Images the cluster imports, by upstream reference.
//
// The machine has no registry, so standInImages builds a local stand-in for
// each test image, and productImage builds the product's image as
// hack/build-image does (internal/imagebuild): the image users deploy is the
// image the cluster runs. containerd names an image by its normalized
// reference, and so do the tarballs: busybox:1.36 is imported as
// docker.io/library/busybox:1.36, which is the name the CRI looks up for a
// pod that asks for busybox:1.36.
//
// The test images are those of test/utils/image/manifest.go at the
// release test/testbin pins (v1.37.2), so that e2e.test finds them.
const (
	AgnhostImage = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"
	// DnsutilsImage is the DNS specs' client image: glibc-dns-testing,
	// jessie-dnsutils before v1.36.
	DnsutilsImage = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1"
	BusyboxImage  = "registry.k8s.io/e2e-test-images/busybox:1.37.0-2"
	PauseImage    = "registry.k8s.io/pause:3.10.1"
	// CoreDNSImage is kubeadm's CoreDNS: /coredns (test/testbin's
	// CoreDNS) as its entrypoint, nothing else, as upstream's image.
	CoreDNSImage = "registry.k8s.io/coredns/coredns:v1.12.1"
	// NodeCacheImage stands in for NodeLocal DNSCache's node-cache (not
	// on the module proxy): the tools with /coredns. Its DaemonSet's
	// command does node-cache's set-up around it (TestClusterMigration).
	NodeCacheImage = "registry.k8s.io/dns/k8s-dns-node-cache:1.26.4"
	// ProductImage is the name deploy/kustomization.yaml renders.
	ProductImage = "dnsconfigurer:latest"
)

// prevReleaseImages are the same stand-ins under the names of the oldest
// tested release's e2e.test (v1.34.4, test/testbin/release-1.34): the
// TestClusterOldest stage runs that release's specs on this cluster.
var prevReleaseImages = map[string]string{
	"registry.k8s.io/e2e-test-images/agnhost:2.56":        AgnhostImage,
	"registry.k8s.io/e2e-test-images/jessie-dnsutils:1.7": DnsutilsImage,
	"registry.k8s.io/e2e-test-images/busybox:1.37.0-1":    BusyboxImage,
}

// imgEnv is the environment of every stand-in image: Debian's PATH.
var imgEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// imgTools are the host commands copied into the tools root filesystem:
// dash and bash, dig, nslookup and host (bind9-dnsutils), getent (libc-bin),
// awk (mawk), ip (iproute2), find and xargs (findutils), hostname, sed,
// grep, and coreutils.
var imgTools = []string{
	"sh", "bash", "dig", "nslookup", "host", "getent", "awk", "ip", "find",
	"xargs", "hostname", "sed", "grep",
	"cat", "echo", "printf", "test", "[", "seq", "sleep", "ls", "mkdir", "rm",
	"rmdir", "cp", "mv", "ln", "chmod", "head", "tail", "cut", "tr", "wc",
	"sort", "uniq", "date", "true", "false", "env", "id", "whoami", "timeout",
	"tee", "touch", "basename", "dirname", "readlink", "stat", "uname", "expr",
	"mktemp", "pwd", "base64", "md5sum", "sha256sum", "nproc", "yes",
}

// imgOptionalTools are copied when the host has them (setup.sh installs
// netcat-openbsd; curl and wget are the usual Debian ones; chroot, with
// which the node-cache stand-in runs the node's iptables).
var imgOptionalTools = []string{"nc", "curl", "wget", "ss", "chroot"}

// imgLibDirs are the directories the dynamic loader searches when there is
// no ld.so.cache, as in the stand-in images: Debian's multiarch system
// directories first.
var imgLibDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib64", "/usr/lib64", "/lib", "/usr/lib",
}

// imgFormat is folded into the tarballs' file names, so that a change to
// how they are made does not reuse an old tarball from a kept directory.
const imgFormat = "standin-v1"

// clusterImages builds every image above as a tarball under dir and
// returns ref -> tarball path: the stand-ins (see standInImages) and
// ProductImage from the module's source (see productImage).
func clusterImages(ctx context.Context, dir, binDir string) (map[string]string, error) {
	images, err := standInImages(ctx, dir, binDir)
	if err != nil {
		return nil, err
	}
	if images[ProductImage], err = productImage(ctx, dir); err != nil {
		return nil, err
	}
	return images, nil
}

// productImage builds ProductImage from the module's source with
// internal/imagebuild, as `IMAGE=dnsconfigurer:latest hack/build-image
// --platform linux/<host>` does (an index of the host's platform only:
// the node runs nothing else), into dir, and returns its path. The
// binary runs as the image's user, 65532, unless a pod's securityContext
// says otherwise.
func productImage(ctx context.Context, dir string) (string, error) {
	root, err := imgModuleRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "dnsconfigurer-latest.tar")
	if _, err := imagebuild.BuildFile(ctx, p, imagebuild.Options{Dir: root, Name: ProductImage, Platforms: []string{"linux/" + runtime.GOARCH}}); err != nil {
		return "", fmt.Errorf("product image %s: %w", ProductImage, err)
	}
	return p, nil
}

// standInImages builds the test images above (all but ProductImage) as
// OCI tarballs under dir and returns ref -> tarball path. binDir holds
// agnhost and coredns (static Go binaries built by test/testbin/build.sh),
// which, like the pause binary built here, must be statically linked.
//
// The tools root filesystem is Debian's own binaries from this host plus
// their shared libraries; it is built once per process. Tarball names carry
// a digest of their contents, so a second call with the same inputs and dir
// writes nothing. DnsutilsImage and BusyboxImage have the
// same layer, which containerd stores once.
func standInImages(ctx context.Context, dir, binDir string) (map[string]string, error) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("stand-in images: need a linux/amd64 host, have %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	tools, err := imgToolsRootfs()
	if err != nil {
		return nil, err
	}
	pause, err := imgPauseBinary(ctx)
	if err != nil {
		return nil, err
	}
	agnhost, err := imgReadStatic(filepath.Join(binDir, "agnhost"))
	if err != nil {
		return nil, err
	}
	coredns, err := imgReadStatic(filepath.Join(binDir, "coredns"))
	if err != nil {
		return nil, err
	}

	// The agnhost image's extras follow its Dockerfile
	// (kubernetes test/images/agnhost): /coredns, the agnhost-2 link, the
	// /uploads directory and a user and group defined in the image.
	agnhostFiles := imgWithout(tools, "/etc/passwd", "/etc/group")
	agnhostFiles = append(agnhostFiles,
		containerd.ImageFile{Path: "/agnhost", Mode: 0o755, Data: agnhost},
		containerd.ImageFile{Path: "/agnhost-2", Link: "agnhost"},
		containerd.ImageFile{Path: "/coredns", Mode: 0o755, Data: coredns},
		containerd.ImageFile{Path: "/uploads", Mode: fs.ModeDir | 0o755},
		containerd.ImageFile{Path: "/etc/passwd", Mode: 0o644, Data: []byte(imgPasswd +
			"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n")},
		containerd.ImageFile{Path: "/etc/group", Mode: 0o644, Data: []byte(imgGroup +
			"user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n")},
	)
	images := []struct {
		ref string
		img containerd.Image
	}{
		// agnhost: ENTRYPOINT ["/agnhost"], CMD ["pause"].
		{AgnhostImage, containerd.Image{Files: agnhostFiles, Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}}},
		// glibc-dns-testing (and jessie-dnsutils) inherit debian's CMD ["bash"].
		{DnsutilsImage, containerd.Image{Files: tools, Cmd: []string{"bash"}}},
		// busybox images: CMD ["sh"].
		{BusyboxImage, containerd.Image{Files: tools, Cmd: []string{"sh"}}},
		{CoreDNSImage, containerd.Image{Files: []containerd.ImageFile{
			{Path: "/coredns", Mode: 0o755, Data: coredns},
			{Path: "/etc/passwd", Mode: 0o644, Data: []byte(imgPasswd)},
			{Path: "/etc/group", Mode: 0o644, Data: []byte(imgGroup)},
		}, Entrypoint: []string{"/coredns"}}},
		{NodeCacheImage, containerd.Image{Files: append(slices.Clone(tools),
			containerd.ImageFile{Path: "/coredns", Mode: 0o755, Data: coredns}), Cmd: []string{"sh"}}},
		{PauseImage, containerd.Image{Files: []containerd.ImageFile{
			{Path: "/pause", Mode: 0o755, Data: pause},
			{Path: "/etc/passwd", Mode: 0o644, Data: []byte(imgPasswd)},
			{Path: "/etc/group", Mode: 0o644, Data: []byte(imgGroup)},
		}, Entrypoint: []string{"/pause"}}},
	}
	for _, old := range slices.Sorted(maps.Keys(prevReleaseImages)) {
		for _, im := range images {
			if im.ref == prevReleaseImages[old] {
				images = append(images, struct {
					ref string
					img containerd.Image
				}{old, im.img})
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("stand-in images: %w", err)
	}
	out := make(map[string]string, len(images))
	for _, im := range images {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		im.img.Ref = imgNormalizeRef(im.ref)
		im.img.Env = imgEnv
		p, err := imgWriteTarball(dir, im.img)
		if err != nil {
			return nil, fmt.Errorf("stand-in image %s: %w", im.ref, err)
		}
		out[im.ref] = p
	}
	return out, nil
}

// imgNormalizeRef returns ref as containerd and the CRI name it: with its
// registry (docker.io, and library/ for an official image) and a tag
// (latest when it has neither tag nor digest).
func imgNormalizeRef(ref string) string {
	i := strings.IndexByte(ref, '/')
	if i < 0 || (!strings.ContainsAny(ref[:i], ".:") && ref[:i] != "localhost") {
		ref = "docker.io/" + ref
	}
	if rest, ok := strings.CutPrefix(ref, "docker.io/"); ok && !strings.Contains(rest, "/") {
		ref = "docker.io/library/" + rest
	}
	if last := ref[strings.LastIndexByte(ref, '/')+1:]; !strings.ContainsAny(last, ":@") {
		ref += ":latest"
	}
	return ref
}

// imgWriteTarball writes img as an OCI tarball in dir, named after the
// reference and a digest of everything that goes into it, and returns its
// path. When that file already exists it is reused as it is.
func imgWriteTarball(dir string, img containerd.Image) (string, error) {
	key, err := imgKey(img)
	if err != nil {
		return "", err
	}
	name := strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '.', r == '-':
			return r
		}
		return '_'
	}, img.Ref)
	p := filepath.Join(dir, name+"-"+key[:16]+".tar")
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return p, nil
	}
	tmp, err := os.CreateTemp(dir, ".tmp-"+name+"-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriterSize(tmp, 1<<20)
	if err := containerd.WriteImage(w, img); err != nil {
		tmp.Close()
		return "", err
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return "", err
	}
	return p, nil
}

// imgKey is the hex sha256 of everything WriteImage reads from img.
func imgKey(img containerd.Image) (string, error) {
	type file struct {
		Path, Link, Data string
		Mode             fs.FileMode
		HardLink         string `json:",omitempty"`
	}
	files := make([]file, 0, len(img.Files))
	for _, f := range img.Files {
		sum := sha256.Sum256(f.Data)
		files = append(files, file{Path: f.Path, Link: f.Link, Mode: f.Mode, Data: hex.EncodeToString(sum[:]), HardLink: f.HardLink})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	b, err := json.Marshal(struct {
		Format, Ref          string
		Entrypoint, Cmd, Env []string
		Files                []file
	}{imgFormat, img.Ref, img.Entrypoint, img.Cmd, img.Env, files})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// imgWithout returns files without the given paths, in a new slice.
func imgWithout(files []containerd.ImageFile, paths ...string) []containerd.ImageFile {
	out := make([]containerd.ImageFile, 0, len(files))
	for _, f := range files {
		drop := false
		for _, p := range paths {
			drop = drop || f.Path == p
		}
		if !drop {
			out = append(out, f)
		}
	}
	return out
}

// The users and groups of every stand-in image: root, nobody, and
// distroless' nonroot (65532), which deploy/ runs as.
const (
	imgPasswd = "root:x:0:0:root:/root:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/nonexistent:/usr/sbin/nologin\n"
	imgGroup = "root:x:0:\n" +
		"nogroup:x:65534:\n" +
		"nonroot:x:65532:\n"
)

// imgNSSwitch uses only the NSS modules glibc (2.34 and later) has built in.
const imgNSSwitch = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n" +
	"networks: files\nprotocols: files\nservices: files\nethers: files\nrpc: files\n"

// imgHosts is a placeholder; the kubelet mounts its own /etc/hosts.
const imgHosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"

var imgToolsMemo struct {
	once  sync.Once
	files []containerd.ImageFile
	err   error
}

// imgToolsRootfs returns the tools root filesystem, building it on the
// first call. It is laid out like Debian's merged /usr: /bin, /sbin, /lib
// and /lib64 are links into /usr, commands are in /usr/bin and each
// library is a regular file under the name the loader looks up. A host
// file needed under several names is stored once and linked from the
// others (sh -> dash, /lib64/ld-linux-x86-64.so.2 -> the loader in
// /lib/x86_64-linux-gnu). The same host gives the same files.
func imgToolsRootfs() ([]containerd.ImageFile, error) {
	imgToolsMemo.once.Do(func() {
		imgToolsMemo.files, imgToolsMemo.err = imgBuildTools()
		if imgToolsMemo.err != nil {
			imgToolsMemo.err = fmt.Errorf("tools root filesystem: %w", imgToolsMemo.err)
		}
	})
	return imgToolsMemo.files, imgToolsMemo.err
}

func imgBuildTools() ([]containerd.ImageFile, error) {
	t := imgTree{files: map[string]string{}, links: map[string]string{}, seen: map[string]bool{}}
	for _, name := range imgTools {
		if err := t.addCommand(name); err != nil {
			return nil, err
		}
	}
	for _, name := range imgOptionalTools {
		if err := t.addCommand(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	files, err := t.imageFiles()
	if err != nil {
		return nil, err
	}
	for _, l := range [][2]string{{"/bin", "usr/bin"}, {"/sbin", "usr/sbin"}, {"/lib", "usr/lib"}, {"/lib64", "usr/lib64"}} {
		files = append(files, containerd.ImageFile{Path: l[0], Link: l[1]})
	}
	files = append(files,
		containerd.ImageFile{Path: "/etc/passwd", Mode: 0o644, Data: []byte(imgPasswd)},
		containerd.ImageFile{Path: "/etc/group", Mode: 0o644, Data: []byte(imgGroup)},
		containerd.ImageFile{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte(imgNSSwitch)},
		containerd.ImageFile{Path: "/etc/hosts", Mode: 0o644, Data: []byte(imgHosts)},
		containerd.ImageFile{Path: "/root", Mode: fs.ModeDir | 0o700},
		containerd.ImageFile{Path: "/var/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
	)
	certs, err := imgCACerts()
	if err != nil {
		return nil, err
	}
	files = append(files, certs...)
	// Port and protocol names (nc, getent services) and ip's tables.
	extra := []string{"/etc/services", "/etc/protocols"}
	if ents, err := os.ReadDir("/etc/iproute2"); err == nil {
		for _, e := range ents {
			if e.Type().IsRegular() {
				extra = append(extra, "/etc/iproute2/"+e.Name())
			}
		}
	}
	for _, p := range extra {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		files = append(files, containerd.ImageFile{Path: p, Mode: 0o644, Data: data})
	}
	return files, nil
}

// imgCACerts returns the host's CA bundle as an image file, or nothing
// when the host has none.
func imgCACerts() ([]containerd.ImageFile, error) {
	const p = "/etc/ssl/certs/ca-certificates.crt"
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []containerd.ImageFile{{Path: p, Mode: 0o644, Data: data}}, nil
}

// imgTree collects host files for a root filesystem.
type imgTree struct {
	files map[string]string // image path -> host path with no symlinks
	links map[string]string // image path -> link target
	seen  map[string]bool   // host ELF files whose dependencies are added
}

// addCommand adds the host command name as /usr/bin/<name>, with the
// libraries it needs. A command that is a link on the host (sh -> dash,
// awk -> mawk) is copied under its real name and linked to it.
func (t *imgTree) addCommand(name string) error {
	var host string
	for _, d := range []string{"/usr/bin", "/usr/sbin", "/bin", "/sbin"} {
		if fi, err := os.Stat(filepath.Join(d, name)); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			host = filepath.Join(d, name)
			break
		}
	}
	if host == "" {
		return fmt.Errorf("command %q: %w", name, fs.ErrNotExist)
	}
	resolved, err := filepath.EvalSymlinks(host)
	if err != nil {
		return err
	}
	base := filepath.Base(resolved)
	t.files["/usr/bin/"+base] = resolved
	if base != name {
		t.links["/usr/bin/"+name] = base
	}
	return t.addDeps(resolved)
}

// addDeps adds the ELF interpreter and the shared-library closure of the
// host file at resolved (a path without symlinks), found as the loader
// would without ld.so.cache. A file that is not ELF (a script) has no
// dependencies.
func (t *imgTree) addDeps(resolved string) error {
	if t.seen[resolved] {
		return nil
	}
	t.seen[resolved] = true
	f, err := elf.Open(resolved)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			return nil
		}
		return err
	}
	defer f.Close()
	interp, err := imgInterp(f)
	if err != nil {
		return fmt.Errorf("%s: %w", resolved, err)
	}
	if interp != "" {
		r, err := filepath.EvalSymlinks(interp)
		if err != nil {
			return fmt.Errorf("%s: interpreter: %w", resolved, err)
		}
		t.files[imgUsrPath(interp)] = r
		if err := t.addDeps(r); err != nil {
			return err
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("%s: %w", resolved, err)
	}
	var runpath []string
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, _ := f.DynString(tag)
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				runpath = append(runpath, strings.ReplaceAll(d, "$ORIGIN", filepath.Dir(resolved)))
			}
		}
	}
	for _, lib := range needed {
		found := false
		for _, d := range append(runpath, imgLibDirs...) {
			p := filepath.Join(d, lib)
			if !imgIsELF(p, f.Class, f.Machine) {
				continue
			}
			r, err := filepath.EvalSymlinks(p)
			if err != nil {
				return err
			}
			t.files[imgUsrPath(p)] = r
			if err := t.addDeps(r); err != nil {
				return err
			}
			found = true
			break
		}
		if !found {
			return fmt.Errorf("%s: library %s not found in %s", resolved, lib, strings.Join(imgLibDirs, ":"))
		}
	}
	return nil
}

// imageFiles reads the collected host files. Each host file becomes one
// regular file, at the first of its image paths in sorted order; its other
// paths are absolute links to that one.
func (t *imgTree) imageFiles() ([]containerd.ImageFile, error) {
	paths := make([]string, 0, len(t.files))
	for p := range t.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	first := map[string]string{} // host path -> image path of its copy
	var files []containerd.ImageFile
	for _, p := range paths {
		host := t.files[p]
		if q, ok := first[host]; ok {
			files = append(files, containerd.ImageFile{Path: p, Link: q})
			continue
		}
		first[host] = p
		fi, err := os.Stat(host)
		if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(host)
		if err != nil {
			return nil, err
		}
		files = append(files, containerd.ImageFile{Path: p, Mode: fi.Mode().Perm(), Data: data})
	}
	for p, target := range t.links {
		if _, ok := t.files[p]; ok {
			continue
		}
		files = append(files, containerd.ImageFile{Path: p, Link: target})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// imgUsrPath maps a host path to its place in a merged-/usr image:
// /lib64/ld-linux-x86-64.so.2 becomes /usr/lib64/ld-linux-x86-64.so.2.
func imgUsrPath(p string) string {
	p = path.Clean(p)
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
		if strings.HasPrefix(p, d+"/") {
			return "/usr" + p
		}
	}
	return p
}

// imgInterp returns the ELF interpreter (PT_INTERP) of f, or "" for a
// static executable.
func imgInterp(f *elf.File) (string, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("read interpreter: %w", err)
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", nil
}

// imgIsELF reports whether p is an ELF file of the given class and
// machine, so a search skips a library of another architecture.
func imgIsELF(p string, class elf.Class, machine elf.Machine) bool {
	f, err := elf.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Class == class && f.Machine == machine
}

// imgReadStatic reads the executable at p and checks that, if it is ELF,
// it needs no interpreter and no shared libraries: agnhost, coredns and
// pause run in images that may have no libc.
func imgReadStatic(p string) ([]byte, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	f, err := elf.Open(p)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			return data, nil
		}
		return nil, err
	}
	defer f.Close()
	interp, err := imgInterp(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	libs, _ := f.ImportedLibraries()
	if interp != "" || len(libs) > 0 {
		return nil, fmt.Errorf("%s is dynamically linked (%s %v); build it with CGO_ENABLED=0", p, interp, libs)
	}
	return data, nil
}

// imgPauseBinary is the static pause binary of the harness's own pause
// image.
func imgPauseBinary(ctx context.Context) ([]byte, error) {
	return containerd.PauseBinary(ctx)
}

// imgModuleRoot is the module's root directory.
func imgModuleRoot() (string, error) {
	return containerd.ModuleRoot()
}

// BusyboxPath is where BusyboxRootfs takes busybox from: Debian's busybox
// package (test/e2e/setup.sh installs it). Not busybox-static: that build
// runs applets inside the shell without looking them up in $PATH, unlike
// the busybox image.
const BusyboxPath = "/bin/busybox"

// BusyboxRootfs is the root filesystem of a busybox image, for suites
// whose specs run busybox's commands (test/e2e/critest): the host's
// busybox as /usr/bin/busybox with its libraries, a hard link to it in
// /bin for each applet it lists (as in the busybox image, so masking one
// masks no other), busybox's users and groups (root, daemon, www-data,
// nobody...), /root and /home. The host commands extra (such as ipcs and
// pgrep, which Debian's busybox leaves out) are added in /usr/bin with
// their libraries. /lib and /lib64 link into /usr. The same host gives
// the same files.
func BusyboxRootfs(ctx context.Context, extra ...string) ([]containerd.ImageFile, error) {
	if _, err := os.Stat(BusyboxPath); err != nil {
		return nil, fmt.Errorf("busybox root filesystem (apt-get install busybox): %w", err)
	}
	list, err := exec.CommandContext(ctx, BusyboxPath, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", BusyboxPath, err)
	}
	t := imgTree{files: map[string]string{}, links: map[string]string{}, seen: map[string]bool{}}
	for _, name := range append([]string{"busybox"}, extra...) {
		if err := t.addCommand(name); err != nil {
			return nil, err
		}
	}
	files, err := t.imageFiles()
	if err != nil {
		return nil, err
	}
	applets := strings.Fields(string(list))
	sort.Strings(applets)
	for _, a := range applets {
		if a != "busybox" && !strings.Contains(a, "/") {
			files = append(files, containerd.ImageFile{Path: "/bin/" + a, HardLink: "/usr/bin/busybox"})
		}
	}
	return append(files,
		containerd.ImageFile{Path: "/lib", Link: "usr/lib"},
		containerd.ImageFile{Path: "/lib64", Link: "usr/lib64"},
		containerd.ImageFile{Path: "/etc/passwd", Mode: 0o644, Data: []byte(busyboxPasswd)},
		containerd.ImageFile{Path: "/etc/group", Mode: 0o644, Data: []byte(busyboxGroup)},
		containerd.ImageFile{Path: "/root", Mode: fs.ModeDir | 0o700},
		containerd.ImageFile{Path: "/home", Mode: fs.ModeDir | 0o755},
	), nil
}

// busyboxPasswd and busyboxGroup are the busybox image's.
const (
	busyboxPasswd = "root:x:0:0:root:/root:/bin/sh\n" +
		"daemon:x:1:1:daemon:/usr/sbin:/bin/false\n" +
		"bin:x:2:2:bin:/bin:/bin/false\n" +
		"sys:x:3:3:sys:/dev:/bin/false\n" +
		"sync:x:4:100:sync:/bin:/bin/sync\n" +
		"mail:x:8:8:mail:/var/spool/mail:/bin/false\n" +
		"www-data:x:33:33:www-data:/var/www:/bin/false\n" +
		"operator:x:37:37:Operator:/var:/bin/false\n" +
		"nobody:x:65534:65534:nobody:/home:/bin/false\n"
	busyboxGroup = "root:x:0:\ndaemon:x:1:\nbin:x:2:\nsys:x:3:\nadm:x:4:\ntty:x:5:\ndisk:x:6:\n" +
		"lp:x:7:\nmail:x:8:\nkmem:x:9:\nwheel:x:10:root\ncdrom:x:11:\ndialout:x:18:\nfloppy:x:19:\n" +
		"video:x:28:\naudio:x:29:\ntape:x:32:\nwww-data:x:33:\noperator:x:37:\nutmp:x:43:\nplugdev:x:46:\n" +
		"staff:x:50:\nlock:x:54:\nnetdev:x:82:\nusers:x:100:\nnogroup:x:65534:\n"
)
