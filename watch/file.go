package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/gateway-api/pkg/consts"
)

// filePoll is how often file mode looks for changed files. Polling
// modification times needs nothing beyond the standard library and works on
// every filesystem, including the symlink swaps of mounted ConfigMaps.
const filePoll = time.Second

// DefaultFileSettle is how long the files must stay unchanged before a
// change is read (FileConfig.Settle): long enough for a writer that
// truncates a file and then writes it (a shell's >, kubectl get -o yaml >
// file, editors that save in place), which takes milliseconds, on a slow
// disk too; short enough that a change still goes live in about a second
// (filePoll plus this).
const DefaultFileSettle = 300 * time.Millisecond

// FileConfig says what a file Source reads and how.
type FileConfig struct {
	// Path is a YAML file or a directory of them (*.yaml, *.yml, searched
	// recursively; directories starting with a dot are left out).
	Path string
	// Settle is how long the files must stay unchanged before a change is
	// read: a file caught while it is written is never served. Zero reads
	// a change as soon as it is seen.
	Settle time.Duration
	// Metrics, when set, registers the file metrics.
	Metrics prometheus.Registerer
	// poll is how often the files are checked: filePoll, or less in tests
	// that must see every state of a file.
	poll time.Duration
}

// NewFile returns a Source that reads cfg.Path, and reads it again whenever
// a file changed and then stayed unchanged for cfg.Settle. A file with a
// document that cannot be decoded keeps its previous version served (on
// the first read, which has none, the documents that could be decoded);
// the error is logged once, counted, and shown among the Problems.
func NewFile(cfg FileConfig, opts Options, publish Publish, log *slog.Logger) (*Source, error) {
	if _, err := os.Stat(cfg.Path); err != nil {
		return nil, fmt.Errorf("config %s: %w", cfg.Path, err)
	}
	if cfg.Settle < 0 {
		return nil, fmt.Errorf("config settle time %v: must not be negative", cfg.Settle)
	}
	s, err := newSource(opts, publish, log)
	if err != nil {
		return nil, err
	}
	if cfg.poll == 0 {
		cfg.poll = filePoll
	}
	f := &fileStore{
		path:   cfg.Path,
		poll:   cfg.poll,
		settle: cfg.Settle,
		log:    s.log,
		good:   map[string]fileObjects{},
		failing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hostgate_config_files_failing",
			Help: "Config files (--config) whose last version could not be read whole; each serves its previous version.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hostgate_config_file_errors_total",
			Help: "Versions of config files (--config) that could not be read whole.",
		}),
	}
	if cfg.Metrics != nil {
		for _, c := range []prometheus.Collector{f.failing, f.failures} {
			if err := cfg.Metrics.Register(c); err != nil {
				return nil, fmt.Errorf("register file metrics: %w", err)
			}
		}
	}
	s.run, s.list = f.run, f.current
	return s, nil
}

// fileStore holds the objects last read from the files.
type fileStore struct {
	path   string
	poll   time.Duration
	settle time.Duration
	log    *slog.Logger
	// good holds, for each file, the objects of its last version that read
	// without an error. Only run's goroutine uses it.
	good     map[string]fileObjects
	failing  prometheus.Gauge
	failures prometheus.Counter
	mu       sync.Mutex
	objs     objects
}

// fileObjects are the objects decoded from one version of a file.
type fileObjects []any

func (l *fileObjects) add(obj any, _ int) bool {
	*l = append(*l, obj)
	return true
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
	var last, lastErr string
	ticker := time.NewTicker(f.poll)
	defer ticker.Stop()
	for {
		fp, files, err := f.fingerprint()
		if err == nil && fp != last {
			fp, files, err = f.settled(ctx, fp)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if err.Error() != lastErr {
				f.log.Error("reading config", "path", f.path, "error", err)
			}
			lastErr = err.Error()
		case fp != last:
			last, lastErr = fp, ""
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

// settled waits until the files' fingerprint stays fp for f.settle, and
// returns the fingerprint that did.
func (f *fileStore) settled(ctx context.Context, fp string) (string, []string, error) {
	timer := time.NewTimer(f.settle)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return "", nil, ctx.Err()
		case <-timer.C:
		}
		now, files, err := f.fingerprint()
		if err != nil || now == fp {
			return now, files, err
		}
		fp = now
		timer.Reset(f.settle)
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

// load reads files into the store: each file's objects, or those of its
// last good version where it has errors.
func (f *fileStore) load(files []string) {
	start := time.Now()
	// Files are read into the Go types, which carry every field of the
	// experimental channel: no API server drops any.
	objs := objects{crdBundleVersion: consts.BundleVersion, crdChannel: channelExperimental}
	good := make(map[string]fileObjects, len(files))
	failing := 0
	for _, p := range files {
		list, errs := readFile(p)
		if len(errs) == 0 {
			good[p] = list
		} else {
			failing++
			f.failures.Inc()
			problem := errors.Join(errs...).Error()
			if prev, ok := f.good[p]; ok {
				good[p], list = prev, prev
				problem += "; serving the file's last version that read without errors"
			} else {
				problem += fmt.Sprintf("; serving the %d objects that could be read", len(list))
			}
			objs.readProblems = append(objs.readProblems, "config file "+problem)
			f.log.Warn("config file not read whole", "path", p, "error", problem)
		}
		for _, obj := range list {
			objs.add(obj, 0)
		}
	}
	f.good = good
	f.failing.Set(float64(failing))
	f.log.Info("read config", "path", f.path, "files", len(files), "files_failing", failing, "seconds", time.Since(start).Seconds())
	f.mu.Lock()
	f.objs = objs
	f.mu.Unlock()
}

// readFile decodes the objects of one file.
func readFile(p string) (fileObjects, []error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, []error{err}
	}
	var list fileObjects
	errs := decodeYAML(p, bytes.NewReader(data), &list)
	return list, errs
}
