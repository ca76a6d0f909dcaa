package pipeline

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/hostgate/hostgate/router"
)

// Request mirroring: a copy of the request goes to an endpoint of the
// mirror's backend on a goroutine of its own, and its response is dropped.
// A mirror never delays or fails the request: one that finds no slot, or
// whose body would pass the bounds below, is dropped, never queued.
const (
	// mirrorTimeout ends a mirrored request that is slower than any
	// response worth comparing.
	mirrorTimeout = 30 * time.Second
	mirrorSlots   = 256
	// A request body is copied as the backend's request reads it, and the
	// copy leaves once the body is whole: no body is read ahead for the
	// mirror, or kept past these bounds, for one copy and for all in
	// flight (ingress-nginx keeps the body whole, in memory or on disk,
	// before it sends either request).
	mirrorBodyLimit  = 1 << 20
	mirrorBodyBudget = 32 << 20
)

// mirror sends a copy of out to an endpoint of m's backend. A request
// with a body is copied once the backend's request has read all of it
// (mirrorTee), or without it where m says so.
func (f *forwarder) mirror(out *http.Request, m *router.Mirror, ex *exchange) {
	if m.Denominator > 0 && rand.Int32N(m.Denominator) >= m.Numerator {
		return
	}
	set := ex.sets.Get(m.Backend.Name)
	rt := f.transport(m.Backend.Protocol, m.Backend.TLS, ex.backendTLS)
	if set == nil || set.Len() == 0 || rt == nil {
		return
	}
	select {
	case f.mirrorSlots <- struct{}{}:
	default:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), mirrorTimeout)
	copyReq := out.Clone(ctx)
	copyReq.Body, copyReq.ContentLength, copyReq.TransferEncoding = nil, 0, nil
	h := set.Pick(nil)
	copyReq.URL.Host = h.Address()
	copyReq.URL.Scheme = upstreamScheme(m.Backend.Protocol)
	if m.Hostname != "" {
		copyReq.Host = m.Hostname
	}
	if m.Path != "" {
		copyReq.URL.Path, copyReq.URL.RawPath = m.Path, ""
	}
	send := func(body []byte) {
		defer func() { <-f.mirrorSlots }()
		defer cancel()
		defer f.mirrorBytes.Add(-int64(len(body)))
		if len(body) > 0 {
			copyReq.Body, copyReq.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		resp, err := rt.RoundTrip(copyReq)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if out.Body == nil || out.Body == http.NoBody || m.NoBody {
		go send(nil)
		return
	}
	out.Body = &mirrorTee{ReadCloser: out.Body, declared: out.ContentLength, f: f, send: send, drop: func() {
		cancel()
		<-f.mirrorSlots
	}}
}

// mirrorTee copies a request body as it is read, and hands the copy to
// send at its end: EOF, or its declared length, as a Transport need not
// read on for the EOF of a body of known length. drop gives the mirror
// up, at most once.
type mirrorTee struct {
	io.ReadCloser
	declared int64
	f        *forwarder
	send     func(body []byte)
	drop     func()
	// mu is taken as the Transport that reads the body may close it on
	// another goroutine; done says send or drop ran.
	mu   sync.Mutex
	buf  []byte
	done bool
}

func (t *mirrorTee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return n, err
	}
	if n > 0 {
		if len(t.buf)+n > mirrorBodyLimit {
			t.release(0)
			return n, err
		}
		if t.f.mirrorBytes.Add(int64(n)) > mirrorBodyBudget {
			t.release(n)
			return n, err
		}
		t.buf = append(t.buf, p[:n]...)
	}
	if err == io.EOF || int64(len(t.buf)) == t.declared {
		t.done = true
		go t.send(t.buf)
	} else if err != nil {
		t.release(0)
	}
	return n, err
}

// Close gives up a copy whose body was not read to its end: the backend
// answered without it, or the client went away.
func (t *mirrorTee) Close() error {
	t.mu.Lock()
	if !t.done {
		t.release(0)
	}
	t.mu.Unlock()
	return t.ReadCloser.Close()
}

// release drops the mirror, and the bytes it counted: its copy's and
// extra, counted and not kept. t.mu is held.
func (t *mirrorTee) release(extra int) {
	t.f.mirrorBytes.Add(-int64(len(t.buf) + extra))
	t.done, t.buf = true, nil
	t.drop()
}
