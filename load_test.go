package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The load driver of the robustness tests: a few keep-alive clients, each
// with its own connections, sending GETs in a loop and counting what went
// wrong by kind, so that a failing test says what clients saw. Kinds are
// request-level (a transport error or an unexpected answer) and
// socket-level: a reset seen on any client socket counts even when
// net/http's client retried the request and hid it.

// loadClient is one kind of client of a load.
type loadClient struct {
	// name says what the client speaks, in the report: "h1", "h2 tls".
	name string
	url  string
	host string
	// tls is nil for cleartext.
	tls *tls.Config
	h2  bool
}

// load runs clients until stop.
type load struct {
	want     string // a body that lacks it is a failure
	stopping chan struct{}
	wg       sync.WaitGroup

	ok atomic.Int64
	// closes counts answers that asked to close the connection
	// (Connection: close).
	closes atomic.Int64

	mu sync.Mutex
	// dials counts the connections opened by each kind of client.
	dials    map[string]int
	failures map[string]int
	first    map[string]string
	// firstAt is when the first request failed.
	firstAt time.Time
	resets  map[string]int
}

// loadPause is each client's pause between requests: enough load to
// keep every connection busy, little enough to leave the control plane CPU
// on two cores under -race.
const loadPause = 5 * time.Millisecond

// startLoad starts perClient clients of each kind; every answer must be a
// 200 whose body contains want.
func startLoad(t *testing.T, want string, perClient int, clients ...loadClient) *load {
	t.Helper()
	l := &load{want: want, stopping: make(chan struct{}), dials: map[string]int{}, failures: map[string]int{}, first: map[string]string{}, resets: map[string]int{}}
	for _, c := range clients {
		for range perClient {
			w := &loadWorker{load: l, c: c}
			w.hc = w.client()
			l.wg.Go(w.run)
		}
	}
	t.Cleanup(l.stop)
	return l
}

// loadWorker is one client, with a Transport and so connections of its
// own.
type loadWorker struct {
	*load
	c  loadClient
	hc *http.Client
	// dialed is the connection opened last: the one of a request that
	// failed before the Transport said which connection it got.
	dialed atomic.Pointer[watchedConn]
}

func (w *loadWorker) client() *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			w.mu.Lock()
			w.dials[w.c.name]++
			w.mu.Unlock()
			wc := &watchedConn{Conn: conn, load: w.load, name: w.c.name}
			w.dialed.Store(wc)
			return wc, nil
		},
		// A copy each: a Transport adds "h2" to its config's NextProtos.
		TLSClientConfig:     w.c.tls.Clone(),
		MaxIdleConnsPerHost: 1,
		Protocols:           new(http.Protocols),
	}
	switch {
	case w.c.h2 && w.c.tls != nil:
		tr.Protocols.SetHTTP2(true)
	case w.c.h2:
		tr.Protocols.SetUnencryptedHTTP2(true)
	default:
		tr.Protocols.SetHTTP1(true)
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func (w *loadWorker) run() {
	defer w.hc.CloseIdleConnections()
	for {
		select {
		case <-w.stopping:
			return
		default:
		}
		w.request()
		time.Sleep(loadPause)
	}
}

func (w *loadWorker) request() {
	c := w.c
	req, err := http.NewRequest(http.MethodGet, c.url, nil)
	if err != nil {
		w.fail(c.name, "bad request", err)
		return
	}
	req.Host = c.host
	// The Transport reports the connection from its own goroutine.
	var conn atomic.Pointer[watchedConn]
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { conn.Store(unwrapConn(info.Conn)) },
	}))
	w.dialed.Store(nil)
	resp, err := w.hc.Do(req)
	if err != nil {
		kind := errorKind(err)
		wc := conn.Load()
		if wc == nil {
			wc = w.dialed.Load()
		}
		if op, ok := errors.AsType[*net.OpError](err); kind == "reset" && ok && op.Op == "dial" || wc != nil && wc.read.Load() == 0 && kind != "timeout" {
			// The server closed a connection it never answered on, or
			// reset it while it was being opened: as when a stopping
			// server closes its socket with connections still waiting
			// to be accepted. Refused, in effect.
			kind = "not accepted"
		}
		w.fail(c.name, kind, err)
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		w.fail(c.name, "body "+errorKind(err), err)
	case resp.StatusCode != http.StatusOK:
		w.fail(c.name, "status "+resp.Status, fmt.Errorf("%q", body))
	case !strings.Contains(string(body), w.want):
		w.fail(c.name, "unexpected body", fmt.Errorf("%q", body))
	default:
		w.ok.Add(1)
		if resp.Close {
			w.closes.Add(1)
		}
	}
}

// errorKind names the kinds of transport error that tell one failure
// from another: a refused dial (nothing listens), a reset, a connection
// that ended early, a timeout.
func errorKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case isReset(err):
		return "reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other"
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func (l *load) fail(client, kind string, err error) {
	key := client + ": " + kind
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures[key]++
	if l.firstAt.IsZero() {
		l.firstAt = time.Now()
	}
	if _, ok := l.first[key]; !ok {
		l.first[key] = err.Error()
	}
}

// watchedConn counts resets on a client socket.
type watchedConn struct {
	net.Conn
	load *load
	name string
	read atomic.Int64 // bytes
}

func unwrapConn(c net.Conn) *watchedConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	wc, _ := c.(*watchedConn)
	return wc
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	c.noteReset(err)
	return n, err
}

func (c *watchedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.noteReset(err)
	return n, err
}

func (c *watchedConn) noteReset(err error) {
	if err == nil || !isReset(err) {
		return
	}
	key := c.name + " clients"
	if c.read.Load() == 0 {
		key += neverAnswered
	}
	c.load.mu.Lock()
	c.load.resets[key]++
	c.load.mu.Unlock()
}

// neverAnswered marks resets of connections the server never sent a byte
// on, which check allows where it allows "not accepted" failures.
const neverAnswered = " on connections never answered"

// stop ends the load and waits for requests in flight; it may be called
// more than once.
func (l *load) stop() {
	select {
	case <-l.stopping:
	default:
		close(l.stopping)
	}
	l.wg.Wait()
}

// String reports what the clients saw.
func (l *load) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%d ok (%d with Connection: close); connections opened:", l.ok.Load(), l.closes.Load())
	for _, name := range slices.Sorted(maps.Keys(l.dials)) {
		fmt.Fprintf(&b, " %d %s", l.dials[name], name)
	}
	for _, key := range slices.Sorted(maps.Keys(l.failures)) {
		fmt.Fprintf(&b, "\n  %d failed with %s, the first: %s", l.failures[key], key, l.first[key])
	}
	for _, name := range slices.Sorted(maps.Keys(l.resets)) {
		fmt.Fprintf(&b, "\n  %d socket resets seen by %s", l.resets[name], name)
	}
	return b.String()
}

// check stops the load and fails t unless requests succeeded and none
// failed but with the allowed kinds, and no socket saw a reset.
func (l *load) check(t *testing.T, allowed ...string) {
	t.Helper()
	l.stop()
	l.mu.Lock()
	bad := false
	for key := range l.resets {
		bad = bad || !strings.HasSuffix(key, neverAnswered) || !slices.Contains(allowed, "not accepted")
	}
	for key := range l.failures {
		_, kind, _ := strings.Cut(key, ": ")
		bad = bad || !slices.Contains(allowed, kind)
	}
	l.mu.Unlock()
	if bad || l.ok.Load() == 0 {
		t.Errorf("load: %s", l)
		return
	}
	t.Logf("load: %s", l)
}

// opened returns how many connections clients of kind name opened.
func (l *load) opened(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dials[name]
}

// firstFailure returns when the first request failed, zero if none did.
func (l *load) firstFailure() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.firstAt
}
