package watch

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/gateway-api/pkg/consts"
)

// filePoll is how often file mode looks for changed files. Polling
// modification times needs nothing beyond the standard library and works on
// every filesystem, including the symlink swaps of mounted ConfigMaps.
const filePoll = time.Second

// NewFile returns a Source that reads path, a YAML file or a directory of
// them (*.yaml, *.yml, searched recursively), and reads it again whenever a
// file changes. Documents that cannot be decoded are logged and skipped.
func NewFile(path string, opts Options, publish Publish, log *slog.Logger) (*Source, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	s, err := newSource(opts, publish, log)
	if err != nil {
		return nil, err
	}
	f := &fileStore{path: path, log: s.log}
	s.run, s.list = f.run, f.current
	return s, nil
}

// fileStore holds the objects last read from the files.
type fileStore struct {
	path string
	log  *slog.Logger

	mu   sync.Mutex
	objs objects
}

// current returns the objects last read. Only the translating goroutine
// uses the slices (translate sorts them in place); load replaces them whole.
func (f *fileStore) current() *objects {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.objs
	return &o
}

func (f *fileStore) run(ctx context.Context, changed func()) error {
	var last string
	ticker := time.NewTicker(filePoll)
	defer ticker.Stop()
	for {
		if fp, files, err := f.fingerprint(); err != nil {
			f.log.Error("reading config", "path", f.path, "error", err)
		} else if fp != last {
			last = fp
			f.load(files)
			changed()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// fingerprint lists the config files with their sizes and modification
// times; a different fingerprint means something changed.
func (f *fileStore) fingerprint() (string, []string, error) {
	var b strings.Builder
	var files []string
	err := filepath.WalkDir(f.path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != f.path && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if p != f.path && !isYAMLFile(p) {
			return nil
		}
		info, err := os.Stat(p) // follows symlinks, unlike d.Info
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %d\n", p, info.Size(), info.ModTime().UnixNano())
		files = append(files, p)
		return nil
	})
	return b.String(), files, err
}

func isYAMLFile(p string) bool {
	ext := filepath.Ext(p)
	return ext == ".yaml" || ext == ".yml"
}

func (f *fileStore) load(files []string) {
	start := time.Now()
	objs := objects{crdBundleVersion: consts.BundleVersion}
	var errs []error
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, decodeYAML(p, bytes.NewReader(data), &objs)...)
	}
	for _, err := range errs {
		f.log.Warn("skipped a document", "error", err)
	}
	f.log.Info("read config", "path", f.path, "files", len(files), "errors", len(errs), "seconds", time.Since(start).Seconds())
	f.mu.Lock()
	f.objs = objs
	f.mu.Unlock()
}
