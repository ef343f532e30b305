package feed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/internal/filewatch"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/fqdn"
)

// MaxManifestSize caps the size of one manifest file.
const MaxManifestSize = 64 << 20

// ManifestError is a problem with one document of one manifest file.
// Doc counts documents from 1; 0 means the file as a whole.
type ManifestError struct {
	File string
	Doc  int
	Err  error
}

func (e *ManifestError) Error() string {
	if e.Doc == 0 {
		return fmt.Sprintf("manifest %q: %v", e.File, e.Err)
	}
	return fmt.Sprintf("manifest %q document %d: %v", e.File, e.Doc, e.Err)
}

func (e *ManifestError) Unwrap() error { return e.Err }

// manifestFiles lists the files of path: path itself when it is a file,
// else its *.yaml, *.yml and *.json files (not recursive), sorted.
func manifestFiles(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("objects %q: %w", path, err)
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("objects %q: %w", path, err)
	}
	var files []string
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
	return files, nil
}

// LoadManifests reads the Services, EndpointSlices, Pods and Namespaces of a
// manifest file or directory (the YAML a user would kubectl apply; "List"
// documents are unpacked, other kinds are skipped). The first problem is
// returned as a *ManifestError naming the file and document.
func LoadManifests(path string) (store.Objects, error) {
	var objs store.Objects
	files, err := manifestFiles(path)
	if err != nil {
		return objs, err
	}
	for _, f := range files {
		if err := loadFile(f, &objs); err != nil {
			return store.Objects{}, err
		}
	}
	return objs, nil
}

func loadFile(path string, objs *store.Objects) error {
	fh, err := os.Open(path)
	if err != nil {
		return &ManifestError{File: path, Err: err}
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxManifestSize+1))
	if err != nil {
		return &ManifestError{File: path, Err: err}
	}
	if len(data) > MaxManifestSize {
		return &ManifestError{File: path, Err: fmt.Errorf("larger than %d bytes", MaxManifestSize)}
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err == nil {
			err = decodeDocument(doc, objs)
		}
		if err != nil {
			return &ManifestError{File: path, Doc: i, Err: err}
		}
	}
}

type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

func isBlank(doc []byte) bool {
	for _, l := range bytes.Split(doc, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}

func decodeDocument(doc []byte, objs *store.Objects) error {
	if isBlank(doc) {
		return nil
	}
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return fmt.Errorf("parse yaml: %w", err)
	}
	return decodeJSON(js, objs)
}

func decodeJSON(js []byte, objs *store.Objects) error {
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil
	}
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return fmt.Errorf("parse object: %w", err)
	}
	switch tm.Kind {
	case "List", "ServiceList", "EndpointSliceList", "PodList", "NamespaceList":
		for i, it := range tm.Items {
			if err := decodeJSON(it, objs); err != nil {
				return fmt.Errorf("items[%d]: %w", i, err)
			}
		}
		return nil
	case "Service":
		v, err := decodeAs(js, tm, ToService)
		if err != nil {
			return err
		}
		objs.Services = append(objs.Services, v)
	case "EndpointSlice":
		v, err := decodeAs(js, tm, ToEndpointSlice)
		if err != nil {
			return err
		}
		if v.Service == "" {
			return fmt.Errorf("endpointslice %s/%s: metadata.labels[%q] is missing", v.Namespace, v.Name, serviceNameLabel)
		}
		objs.EndpointSlices = append(objs.EndpointSlices, v)
	case "Pod":
		var p corev1.Pod
		if err := strictJSON(js, &p, tm); err != nil {
			return err
		}
		v, ok, err := ToPod(&p)
		if err != nil {
			return err
		}
		if ok {
			objs.Pods = append(objs.Pods, v)
		}
	case "Namespace":
		var n corev1.Namespace
		if err := strictJSON(js, &n, tm); err != nil {
			return err
		}
		if n.Name == "" {
			return fmt.Errorf("namespace: metadata.name is empty")
		}
		if err := checkName(n.Name, fqdn.Label); err != nil {
			return fmt.Errorf("namespace %s: metadata.name %w", n.Name, err)
		}
		objs.Namespaces = append(objs.Namespaces, store.Namespace{Name: n.Name})
	case "":
		return fmt.Errorf("kind is missing")
	}
	return nil
}

// decodeAs decodes js strictly as a T (strictJSON) and converts it to its
// store record.
func decodeAs[T, V any](js []byte, tm typeMeta, conv func(*T) (V, error)) (V, error) {
	var obj T
	if err := strictJSON(js, &obj, tm); err != nil {
		var none V
		return none, err
	}
	return conv(&obj)
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
	// Keys are the objects of a kind the store holds (a relist deletes
	// those it no longer lists).
	Keys(store.ObjectKind) []store.Key
	Publish() *store.Snapshot
}

// Manifests serves the records of a manifest file or directory and reloads
// them when the files change (internal/filewatch). A reload that fails is
// logged with its file and document and the previous records keep being
// served.
type Manifests struct {
	// Path is a manifest file or directory.
	Path string
	// Store receives the records.
	Store Publisher
	// Logger (default: discard).
	Logger *slog.Logger
	// Debounce is the quiet time after a change before reloading (default
	// 100ms).
	Debounce time.Duration
	// OnReload, when set, is called after every reload attempt with its
	// error (nil on success).
	OnReload func(error)

	loaded bool
}

// Load reads the manifests once and publishes them. Run calls it first.
func (m *Manifests) Load() error {
	objs, err := LoadManifests(m.Path)
	if err != nil {
		return err
	}
	m.Store.Replace(objs)
	m.Store.Publish()
	m.loaded = true
	return nil
}

// Run loads the manifests (unless Load already did) and watches them until
// ctx is done. It returns an error when the first load fails or the watch
// cannot be set up.
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
	if !m.loaded {
		if err := m.Load(); err != nil {
			return err
		}
	}
	log.InfoContext(ctx, "manifests loaded", "path", m.Path)
	// The channel closes when ctx is done.
	for range changes {
		if ctx.Err() != nil {
			return nil
		}
		err := m.Load()
		// Loading makes garbage several times the size of the records;
		// give it back rather than keep it as RSS.
		debug.FreeOSMemory()
		if err != nil {
			log.ErrorContext(ctx, "manifest reload failed, serving the previous records", "path", m.Path, "err", err)
		} else {
			log.InfoContext(ctx, "manifests reloaded", "path", m.Path)
		}
		if m.OnReload != nil {
			m.OnReload(err)
		}
	}
	return nil
}
