package kubefeed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	kjson "sigs.k8s.io/json"

	"github.com/dnsconfigurer/dnsconfigurer/internal/filewatch"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/manifest"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// MaxManifestSize caps the size of one manifest file.
const MaxManifestSize = 64 << 20

// ManifestError is a file, document or object of a manifest that is
// skipped.
type ManifestError struct {
	File string
	// Doc counts documents from 1; 0 means the file as a whole.
	Doc int
	// Item is the path of a List's item ("items[2]"), "" for the
	// document itself.
	Item string
	// Kind is the kind label: KindService, KindEndpointSlice, KindPod,
	// KindNamespace, else KindDocument or KindFile.
	Kind string
	// Namespace and Name are the object's, when known.
	Namespace, Name string
	// Reason is the reason label (ReasonInvalidName, ReasonDecode, ...).
	Reason string
	Err    error
}

func (e *ManifestError) Error() string {
	at := fmt.Sprintf("manifest %q", e.File)
	if e.Doc > 0 {
		at += fmt.Sprintf(" document %d", e.Doc)
	}
	if e.Item != "" {
		at += " " + e.Item
	}
	return at + ": " + e.Err.Error()
}

func (e *ManifestError) Unwrap() error { return e.Err }

// key is what Skips remembers the problem under: the object, else the
// document and item (or the file).
func (e *ManifestError) key() skipKey {
	if e.Name != "" {
		return skipKey{kind: e.Kind, file: e.File, ns: e.Namespace, name: e.Name}
	}
	return skipKey{kind: e.Kind, file: e.File, doc: e.Doc, item: e.Item}
}

// ManifestErrors are the files, documents and objects a load skipped, in
// the order met.
type ManifestErrors []*ManifestError

func (e ManifestErrors) Error() string {
	msgs := make([]string, len(e))
	for i, m := range e {
		msgs[i] = m.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap lets errors.As find each *ManifestError.
func (e ManifestErrors) Unwrap() []error {
	errs := make([]error, len(e))
	for i, m := range e {
		errs[i] = m
	}
	return errs
}

// manifestFiles lists the files of path: path itself when it is a file,
// else its *.yaml, *.yml and *.json files (not recursive), sorted. dir
// tells which.
func manifestFiles(path string) (files []string, dir bool, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, false, fmt.Errorf("objects %q: %w", path, err)
	}
	if !fi.IsDir() {
		return []string{path}, false, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, true, fmt.Errorf("objects %q: %w", path, err)
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") {
			continue
		}
		switch strings.ToLower(filepath.Ext(n)) {
		case ".yaml", ".yml", ".json":
			files = append(files, filepath.Join(path, n))
		}
	}
	sort.Strings(files)
	return files, true, nil
}

// LoadManifests reads the Services, EndpointSlices, Pods and Namespaces of a
// manifest file or directory (the YAML a user would kubectl apply; "List"
// documents are unpacked, other kinds are skipped). A file of a directory
// that cannot be read, a document that does not decode and an object that
// does not convert are skipped: objs holds everything else, and err is
// then the ManifestErrors naming each file, document and field. Any other
// error means path itself (a directory, or the one file it names) cannot
// be read, and objs is empty.
func LoadManifests(path string) (objs store.Objects, err error) {
	files, dir, err := manifestFiles(path)
	if err != nil {
		return objs, err
	}
	return loadFiles(files, dir)
}

// loadFiles is LoadManifests of the files manifestFiles listed.
func loadFiles(files []string, dir bool) (objs store.Objects, err error) {
	var l loader
	for _, f := range files {
		if fe := l.file(f); fe != nil {
			if !dir {
				return store.Objects{}, fe
			}
			l.skipped = append(l.skipped, fe)
		}
	}
	if len(l.skipped) > 0 {
		return l.objs, l.skipped
	}
	return l.objs, nil
}

// loader collects the objects of manifest files and the problems of what
// it skips.
type loader struct {
	objs    store.Objects
	skipped ManifestErrors
}

// file loads the documents of one file. It returns the file's problem when
// it is not read at all.
func (l *loader) file(path string) *ManifestError {
	fh, err := os.Open(path)
	if err != nil {
		return &ManifestError{File: path, Kind: KindFile, Reason: ReasonUnreadable, Err: err}
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxManifestSize+1))
	if err != nil {
		return &ManifestError{File: path, Kind: KindFile, Reason: ReasonUnreadable, Err: err}
	}
	if len(data) > MaxManifestSize {
		return &ManifestError{File: path, Kind: KindFile, Reason: ReasonTooLarge, Err: fmt.Errorf("larger than %d bytes", MaxManifestSize)}
	}
	// pkg/manifest splits the stream: YAML documents, or JSON values.
	err = manifest.Documents(bytes.NewReader(data), MaxManifestSize, func(d manifest.Document) {
		if d.Err != nil {
			l.skipped = append(l.skipped, &ManifestError{File: path, Doc: d.Index, Kind: KindDocument, Reason: ReasonDecode, Err: fmt.Errorf("parse yaml: %w", d.Err)})
			return
		}
		l.json(path, d.Index, "", d.JSON)
	})
	var me *manifest.Error
	if errors.As(err, &me) {
		// The stream cannot be split past here.
		l.skipped = append(l.skipped, &ManifestError{File: path, Doc: me.Document, Kind: KindDocument, Reason: ReasonDecode,
			Err: fmt.Errorf("split the YAML stream: %w; the rest of the file is skipped", me.Err)})
	}
	return nil
}

type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

// json loads the object js, item of document doc of file ("" for the
// document itself).
func (l *loader) json(file string, doc int, item string, js []byte) {
	skip := func(e *ManifestError) {
		e.File, e.Doc, e.Item = file, doc, item
		l.skipped = append(l.skipped, e)
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return
	}
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		skip(&ManifestError{Kind: KindDocument, Reason: ReasonDecode, Err: fmt.Errorf("parse object: %w", err)})
		return
	}
	objs := &l.objs
	var err error
	switch tm.Kind {
	case "List", "ServiceList", "EndpointSliceList", "PodList", "NamespaceList", "NodeList":
		for i, it := range tm.Items {
			l.json(file, doc, joinItem(item, i), it)
		}
		return
	case "Service":
		err = appendAs(&objs.Services, js, tm, ToService)
	case "EndpointSlice":
		err = appendAs(&objs.EndpointSlices, js, tm, manifestSlice)
	case "Pod":
		var p corev1.Pod
		if err = strictJSON(js, &p, tm); err == nil {
			var v store.Pod
			var ok bool
			if v, ok, err = ToPod(&p); err == nil && ok {
				objs.Pods = append(objs.Pods, v)
			}
		}
	case "Namespace":
		err = appendAs(&objs.Namespaces, js, tm, ToNamespace)
	case "Node":
		err = appendAs(&objs.Nodes, js, tm, ToNode)
	case "":
		skip(&ManifestError{Kind: KindDocument, Reason: ReasonDecode, Err: errors.New("kind is missing")})
	}
	if err != nil {
		skip(objectProblem(tm, js, err))
	}
}

// joinItem is the path of item i of the List at item.
func joinItem(item string, i int) string {
	if item == "" {
		return fmt.Sprintf("items[%d]", i)
	}
	return fmt.Sprintf("%s.items[%d]", item, i)
}

// objectProblem is the ManifestError of an object of a known kind that
// does not decode or convert.
func objectProblem(tm typeMeta, js []byte, err error) *ManifestError {
	if oe, ok := err.(*ObjectError); ok {
		return &ManifestError{Kind: oe.Kind, Namespace: oe.Namespace, Name: oe.Name, Reason: oe.Reason(), Err: err}
	}
	// A decode error: name the object when its metadata says (best effort).
	var m struct {
		Metadata struct{ Name, Namespace string } `json:"metadata"`
	}
	_ = json.Unmarshal(js, &m)
	kind := strings.ToLower(tm.Kind)
	ns := defaultNamespace(m.Metadata.Namespace)
	if kind == KindNamespace || kind == KindNode {
		ns = ""
	}
	return &ManifestError{Kind: kind, Namespace: ns, Name: m.Metadata.Name, Reason: ReasonDecode, Err: err}
}

// appendAs decodes js strictly as a T (strictJSON), converts it to its
// store record and appends that to list.
func appendAs[T, V any](list *[]V, js []byte, tm typeMeta, conv func(*T) (V, error)) error {
	var obj T
	if err := strictJSON(js, &obj, tm); err != nil {
		return err
	}
	v, err := conv(&obj)
	if err == nil {
		*list = append(*list, v)
	}
	return err
}

// manifestSlice is ToEndpointSlice for a manifest, which refuses a slice
// that names no Service.
func manifestSlice(s *discoveryv1.EndpointSlice) (store.EndpointSlice, error) {
	v, err := ToEndpointSlice(s)
	if err == nil && v.Service == "" {
		err = &ObjectError{Kind: KindEndpointSlice, Namespace: v.Namespace, Name: v.Name,
			Field: fmt.Sprintf("metadata.labels[%q]", serviceNameLabel), Err: errors.New("is missing")}
	}
	return v, err
}

func strictJSON(js []byte, v any, tm typeMeta) error {
	// Case-sensitive and strict, as the API server decodes.
	strict, err := kjson.UnmarshalStrict(js, v)
	if err != nil {
		return fmt.Errorf("decode %s (%s): %w", tm.Kind, tm.APIVersion, err)
	}
	if len(strict) > 0 {
		return fmt.Errorf("decode %s (%s): %w", tm.Kind, tm.APIVersion, errors.Join(strict...))
	}
	return nil
}

// Publisher is where the feeds put records: *store.Store implements it.
type Publisher interface {
	Replace(store.Objects)
	SetService(store.Service)
	DeleteService(ns, name string)
	SetEndpointSlice(store.EndpointSlice)
	DeleteEndpointSlice(ns, name string)
	SetPod(store.Pod)
	DeletePod(ns, name string)
	SetNamespace(store.Namespace)
	DeleteNamespace(name string)
	SetNodeTopology(store.NodeTopology)
	DeleteNodeTopology(name string)
	// Keys yields the objects of a kind the store holds (a relist deletes
	// those it no longer lists); the loop must not call the store.
	Keys(store.ObjectKind) iter.Seq[store.Key]
	Publish() *store.Snapshot
}

// Manifests serves the records of a manifest file or directory and reloads
// them when the files change (internal/filewatch). What a load skips (a
// file of the directory, a document, an object) is reported through Skips
// and the rest is served; a load that cannot read Path at all is logged and
// the previous records keep being served.
type Manifests struct {
	// Path is a manifest file or directory.
	Path string
	// Store receives the records.
	Store Publisher
	// Logger (default: discard).
	Logger *slog.Logger
	// Skips reports what a load skips, once per object and problem across
	// reloads (default: logged with Logger, counted on no registry).
	Skips *Skips
	// Debounce is the quiet time after a change before reloading (default
	// 100ms).
	Debounce time.Duration
	// OnReload, when set, is called after every reload attempt with its
	// error: nil when the records were replaced (skips included).
	OnReload func(error)

	loaded  bool
	read    map[string]filewatch.Stamp // the files the last load read, stamped before reading
	settled bool                       // no file was written within its mtime tick of the read
}

// Load reads the manifests once and publishes them, skipping (and
// reporting) what cannot be served. It fails only when Path cannot be
// read; then the store is left as it was. Run calls it first.
func (m *Manifests) Load() error {
	_, err := m.load(context.Background())
	return err
}

// load is Load, returning how many files, documents and objects it
// skipped.
func (m *Manifests) load(ctx context.Context) (skipped int, err error) {
	files, dir, err := manifestFiles(m.Path)
	if err != nil {
		return 0, err
	}
	read, settled := stamps(files, time.Now())
	objs, err := loadFiles(files, dir)
	var errs ManifestErrors
	if err != nil && !errors.As(err, &errs) {
		return 0, err
	}
	if m.Skips == nil {
		m.Skips = unregisteredSkips(m.Logger)
	}
	m.Skips.manifests(ctx, errs)
	m.Store.Replace(objs)
	m.Store.Publish()
	m.loaded, m.read, m.settled = true, read, settled
	return len(errs), nil
}

// stamps are the stamps of files, and whether each is settled at now (a
// file written within its mtime tick may change with the same stamp).
func stamps(files []string, now time.Time) (map[string]filewatch.Stamp, bool) {
	s := make(map[string]filewatch.Stamp, len(files))
	settled := true
	for _, f := range files {
		s[f] = filewatch.Stat(f)
		settled = settled && s[f].Settled(now)
	}
	return s, settled
}

// unchanged reports whether the files are those the last load read, with
// the same stamps, all settled when read.
func (m *Manifests) unchanged() bool {
	files, _, err := manifestFiles(m.Path)
	now, _ := stamps(files, time.Now())
	return err == nil && m.settled && maps.Equal(now, m.read)
}

// Run loads the manifests (unless Load already did, and the files have not
// changed since) and watches them until ctx is done. It returns an error
// when the first load fails or the watch cannot be set up.
func (m *Manifests) Run(ctx context.Context) error {
	log := m.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	debounce := m.Debounce
	if debounce <= 0 {
		debounce = 100 * time.Millisecond
	}
	if _, err := os.Stat(m.Path); err != nil {
		return fmt.Errorf("objects %q: %w", m.Path, err)
	}
	ctx, stop := context.WithCancel(ctx)
	changes, err := filewatch.Watch(ctx, []string{m.Path}, filewatch.WithDebounce(debounce, 0), filewatch.WithLogger(log))
	if err != nil {
		stop()
		return err
	}
	defer func() {
		stop()
		for range changes { // the watch stops with ctx
		}
	}()
	switch {
	case !m.loaded:
		if _, err := m.load(ctx); err != nil {
			return err
		}
	case !m.unchanged():
		// Load ran before the watch began: a change made in between has
		// no event of its own.
		m.reload(ctx, log)
	}
	log.InfoContext(ctx, "manifests loaded", "path", m.Path)
	// The channel closes when ctx is done.
	for range changes {
		if ctx.Err() != nil {
			return nil
		}
		m.reload(ctx, log)
	}
	return nil
}

// reload loads the manifests again, logs how it went and tells OnReload.
func (m *Manifests) reload(ctx context.Context, log *slog.Logger) {
	skipped, err := m.load(ctx)
	// Loading makes garbage several times the size of the records; give
	// it back rather than keep it as RSS.
	debug.FreeOSMemory()
	if err != nil {
		log.ErrorContext(ctx, "manifest reload failed, serving the previous records", "path", m.Path, "err", err)
	} else {
		log.InfoContext(ctx, "manifests reloaded", "path", m.Path, "skipped", skipped)
	}
	if m.OnReload != nil {
		m.OnReload(err)
	}
}
