package watch

// The state file lets a node that restarts while the API server is
// unreachable serve what it served before, instead of nothing. It holds the
// last live Snapshot as JSON of types of its own, because the Snapshot's
// PrivateKey redacts itself in every encoding. The file is written whole
// and atomically (temporary file, fsync, rename, fsync of the directory),
// never on the serving path, and at most once per saveInterval however fast
// the cluster changes. A file of another format version, or one that does
// not decode and validate completely, is refused whole: serving half of a
// damaged configuration would be worse than waiting for the API server.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostgate/hostgate/router"
)

// stateFileVersion is the format written. Bump it whenever the meaning of a
// stored field changes (a field of router.Route included):
// TestStateFileGolden fails until then.
const stateFileVersion = 1

// saveInterval is the least time between two writes of the state file, so
// that a burst of changes costs one fsync, not one each.
const saveInterval = time.Second

// maxStateFileSize refuses a file far larger than any configuration, so
// that a wrong path cannot make hostgate read a disk image into memory.
const maxStateFileSize = 1 << 30

type stateFile struct {
	Version   int                   `json:"version"`
	Written   time.Time             `json:"written"`
	Listeners []stateListener       `json:"listeners"`
	Endpoints map[string][]Endpoint `json:"endpoints"`
	// ClientKeys are the keys of the client certificates that routes
	// present to backends, by certificate name: the routes' own copies
	// redact themselves.
	ClientKeys map[string]string `json:"clientKeys,omitempty"`
}

// stateListener is a Listener whose Certs keep their keys: the outer Certs
// field hides the embedded one from encoding/json.
type stateListener struct {
	Listener
	Certs []stateCert
}

type stateCert struct {
	Name         string
	Hostnames    []string
	CertPEM      string
	KeyPEM       string
	CipherSuites []uint16 `json:",omitempty"`
}

// StateFile keeps the last live Snapshot on disk for the next start.
type StateFile struct {
	path     string
	log      *slog.Logger
	interval time.Duration
	writes   prometheus.Counter
	errors   prometheus.Counter
	serving  prometheus.Gauge

	mu      sync.Mutex
	pending *Snapshot
	kick    chan struct{}
}

// NewStateFile returns a StateFile at path; reg, when set, gets its write
// counters and log, when nil, is slog.Default.
func NewStateFile(path string, log *slog.Logger, reg prometheus.Registerer) *StateFile {
	if log == nil {
		log = slog.Default()
	}
	f := &StateFile{
		path:     path,
		log:      log,
		interval: saveInterval,
		writes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hostgate_state_file_writes_total", Help: "Snapshots written to the state file (--state-file).",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hostgate_state_file_write_errors_total", Help: "Writes of the state file (--state-file) that failed.",
		}),
		serving: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hostgate_state_file_serving", Help: "1 while the configuration served is the state file's (--state-file), until the API server syncs.",
		}),
		kick: make(chan struct{}, 1),
	}
	if reg != nil {
		reg.MustRegister(f.writes, f.errors, f.serving)
	}
	return f
}

// Serving says whether the configuration served is the file's.
func (f *StateFile) Serving(yes bool) {
	if yes {
		f.serving.Set(1)
	} else {
		f.serving.Set(0)
	}
}

// Path is where the file is.
func (f *StateFile) Path() string { return f.path }

// Save queues snap to be written; it never blocks on the disk. Only the
// newest of the snapshots saved between two writes is written.
func (f *StateFile) Save(snap *Snapshot) {
	f.mu.Lock()
	f.pending = snap
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// Start writes saved snapshots until ctx is done, then writes the last one
// still queued, so that a stopping hostgate leaves its newest state behind.
// Failed writes are logged and counted; they never stop hostgate.
func (f *StateFile) Start(ctx context.Context) error {
	f.removeTemporaries()
	var written *Snapshot
	var last time.Time
	timer := time.NewTimer(0)
	timer.Stop()
	write := func() {
		f.mu.Lock()
		snap := f.pending
		f.pending = nil
		f.mu.Unlock()
		// Status writes make the source translate the same store again:
		// an equal snapshot needs no fsync.
		if snap == nil || reflect.DeepEqual(snap, written) {
			return
		}
		last = time.Now()
		if err := writeStateFile(f.path, snap, last); err != nil {
			f.errors.Inc()
			f.log.Warn("writing the state file failed; the previous one stays", "path", f.path, "error", err)
			return
		}
		written = snap
		f.writes.Inc()
		f.log.Debug("state file written", "path", f.path, "seconds", time.Since(last).Seconds())
	}
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			write()
			return nil
		case <-f.kick:
			timer.Reset(max(f.interval-time.Since(last), 0))
		case <-timer.C:
			write()
		}
	}
}

// removeTemporaries deletes what a write cut short by a crash left behind.
func (f *StateFile) removeTemporaries() {
	leftovers, _ := filepath.Glob(temporaryPattern(f.path))
	for _, name := range leftovers {
		if err := os.Remove(name); err != nil {
			f.log.Warn("removing a leftover temporary state file", "path", name, "error", err)
		}
	}
}

// temporaryPattern is the os.CreateTemp pattern of path's temporary files;
// as a glob it matches them too.
func temporaryPattern(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
}

// Load reads and validates the file. The error says why a file that is
// there cannot be used; a missing file is os.ErrNotExist.
func (f *StateFile) Load() (*Snapshot, time.Time, error) {
	return readStateFile(f.path)
}

func writeStateFile(path string, snap *Snapshot, now time.Time) (err error) {
	data, err := encodeState(snap, now)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// CreateTemp makes the file 0600: it holds private keys.
	tmp, err := os.CreateTemp(dir, filepath.Base(temporaryPattern(path)))
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename is durable only once the directory is.
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func encodeState(snap *Snapshot, now time.Time) ([]byte, error) {
	out := stateFile{Version: stateFileVersion, Written: now.UTC(), Endpoints: maps.Collect(snap.Endpoints.All())}
	for _, l := range snap.Listeners {
		sl := stateListener{Listener: l}
		for _, c := range l.Certs {
			sl.Certs = append(sl.Certs, stateCert{Name: c.Name, Hostnames: c.Hostnames, CertPEM: string(c.CertPEM), KeyPEM: string(c.KeyPEM), CipherSuites: c.CipherSuites})
		}
		out.Listeners = append(out.Listeners, sl)
		for i := range l.Routes {
			eachBackendTLS(l.Routes[i].Rules, func(b *router.BackendTLS) {
				if c := b.ClientCertificate; c != nil {
					if out.ClientKeys == nil {
						out.ClientKeys = map[string]string{}
					}
					out.ClientKeys[c.Name] = string(c.KeyPEM)
				}
			})
		}
	}
	return json.Marshal(out)
}

func readStateFile(path string) (*Snapshot, time.Time, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	switch {
	case !info.Mode().IsRegular():
		return nil, time.Time{}, errors.New("not a regular file")
	case info.Mode().Perm()&0o022 != 0:
		return nil, time.Time{}, fmt.Errorf("writable by others (mode %v): anyone who can write it could choose what this node serves", info.Mode().Perm())
	case info.Size() > maxStateFileSize:
		return nil, time.Time{}, fmt.Errorf("%d bytes, more than the %d a state file may have", info.Size(), maxStateFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(file, maxStateFileSize+1))
	if err != nil {
		return nil, time.Time{}, err
	}
	return decodeState(data)
}

// decodeState parses and validates a state file: every field must be one
// this version writes and every value one translation could have made.
func decodeState(data []byte) (*Snapshot, time.Time, error) {
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, time.Time{}, fmt.Errorf("not a state file: %w", err)
	}
	if head.Version != stateFileVersion {
		return nil, time.Time{}, fmt.Errorf("format version %d, this hostgate reads version %d", head.Version, stateFileVersion)
	}
	var in stateFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, time.Time{}, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return nil, time.Time{}, errors.New("decode: data after the end of the snapshot")
	}
	if in.Written.IsZero() {
		return nil, time.Time{}, errors.New("written: missing")
	}
	snap := &Snapshot{Endpoints: NewEndpointSets(in.Endpoints)}
	names := map[string]bool{}
	for i, sl := range in.Listeners {
		l := sl.Listener
		for _, c := range sl.Certs {
			l.Certs = append(l.Certs, Cert{Name: c.Name, Hostnames: c.Hostnames, CertPEM: []byte(c.CertPEM), KeyPEM: PrivateKey(c.KeyPEM), CipherSuites: c.CipherSuites})
		}
		if k := slices.Index(l.Routes, nil); k >= 0 {
			return nil, time.Time{}, fmt.Errorf("listeners[%d] %q: routes[%d]: null", i, l.Name, k)
		}
		if err := restoreClientKeys(l.Routes, in.ClientKeys); err != nil {
			return nil, time.Time{}, fmt.Errorf("listeners[%d] %q: %w", i, l.Name, err)
		}
		if err := validateListener(&l, names); err != nil {
			return nil, time.Time{}, fmt.Errorf("listeners[%d] %q: %w", i, l.Name, err)
		}
		snap.Listeners = append(snap.Listeners, l)
	}
	for name, eps := range in.Endpoints {
		if err := validateEndpoints(eps); err != nil {
			return nil, time.Time{}, fmt.Errorf("endpoints %q: %w", name, err)
		}
	}
	return snap, in.Written, nil
}

func validateListener(l *Listener, names map[string]bool) error {
	if names[l.Name] {
		return errors.New("name: listed twice")
	}
	names[l.Name] = true
	if l.Address != "" {
		if _, err := netip.ParseAddr(l.Address); err != nil {
			return fmt.Errorf("address: %w", err)
		}
	}
	if l.Port < 1 || l.Port > 65535 {
		return fmt.Errorf("port %d: not between 1 and 65535", l.Port)
	}
	name := socketName(l.Address, l.Port)
	if l.Protocol == ProtocolUDP {
		name = udpSocketName(name)
	}
	if l.Name != name {
		return fmt.Errorf("name: not the address and port %s", name)
	}
	switch l.Protocol {
	case ProtocolHTTP, ProtocolTCP, ProtocolUDP:
		if len(l.Certs) > 0 || len(l.ClientValidations) > 0 {
			return fmt.Errorf("certs, clientValidations: an %s listener has none", l.Protocol)
		}
	case ProtocolHTTPS, ProtocolTLS:
	default:
		return fmt.Errorf("protocol %q: must be %s, %s, %s, %s or %s", l.Protocol, ProtocolHTTP, ProtocolHTTPS, ProtocolTLS, ProtocolTCP, ProtocolUDP)
	}
	for i := range l.Routes {
		// Layer 4 routes (of L4 listeners, and of the TLS listeners
		// sharing an HTTPS socket) have their own rules.
		validate := router.Validate
		if l.Routes[i].ID.Kind.IsL4() {
			validate = router.ValidateL4
		}
		if err := validate(l.Routes[i]); err != nil {
			return fmt.Errorf("routes[%d] %s: %w", i, l.Routes[i].ID, err)
		}
	}
	for i, c := range l.Certs {
		if _, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM); err != nil {
			return fmt.Errorf("certs[%d] %s: %w", i, c.Name, err)
		}
	}
	for i, v := range l.ClientValidations {
		if i > 0 && l.ClientValidations[i-1].Hostname >= v.Hostname {
			return fmt.Errorf("clientValidations[%d] %s: hostname %q: not sorted or listed twice", i, v.Name, v.Hostname)
		}
		if _, err := checkCertificates(v.CAPEM); err != nil {
			return fmt.Errorf("clientValidations[%d] %s: %w", i, v.Name, err)
		}
	}
	return nil
}

func validateEndpoints(eps []Endpoint) error {
	for i, ep := range eps {
		if _, err := netip.ParseAddrPort(ep.Address); err != nil {
			return fmt.Errorf("[%d] address: %w", i, err)
		}
		if ep.Weight < 0 {
			return fmt.Errorf("[%d] weight %d: negative", i, ep.Weight)
		}
	}
	return nil
}

// restoreClientKeys gives the client certificates of routes, decoded
// without their keys, the keys kept apart in the file, and checks each
// pair.
func restoreClientKeys(routes []*router.Route, keys map[string]string) error {
	var err error
	for i := range routes {
		eachBackendTLS(routes[i].Rules, func(b *router.BackendTLS) {
			c := b.ClientCertificate
			if c == nil || err != nil {
				return
			}
			key, ok := keys[c.Name]
			if !ok {
				err = fmt.Errorf("routes[%d] %s: client certificate %s: no key in clientKeys", i, routes[i].ID, c.Name)
				return
			}
			// Decoded apart from other routes': no other value shares it.
			c.KeyPEM = router.PrivateKey(key)
			if _, perr := tls.X509KeyPair(c.CertPEM, c.KeyPEM); perr != nil {
				err = fmt.Errorf("routes[%d] %s: client certificate %s: %w", i, routes[i].ID, c.Name, perr)
			}
		})
	}
	return err
}

// eachBackendTLS calls f with the TLS identity of every backend of rules
// that has one, mirrors included.
func eachBackendTLS(rules []router.Rule, f func(*router.BackendTLS)) {
	var ref func(b *router.BackendRef)
	filters := func(fs []router.Filter) {
		for i := range fs {
			if m := fs[i].Mirror; m != nil {
				ref(&m.Backend)
			}
		}
	}
	ref = func(b *router.BackendRef) {
		if b.TLS != nil {
			f(b.TLS)
		}
		filters(b.Filters)
	}
	for i := range rules {
		filters(rules[i].Filters)
		for j := range rules[i].Backends {
			ref(&rules[i].Backends[j])
		}
	}
}
