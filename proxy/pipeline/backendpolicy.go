package pipeline

// A rule's bounds on the exchange with its backend (router.Rule's
// MaxRequestBody, Timeouts.Connect, BackendRead and BackendSend) and its
// fallback backend (router.Fallback), for every engine.
//
// A body larger than the limit is answered 413 before anything of it goes
// to the backend when its length is declared; a body of unknown length is
// cut where it passes the limit, and answered 413 where no answer has
// begun (the backend gets an incomplete request and a closed connection).
//
// The backend read and send timeouts bound the waits of one read of the
// response and one write of the request: on the engine's own connections
// (upstream.Pool) as socket deadlines moved before each read and write, and on
// net/http's Transport, whose connections serve several requests at once,
// as a timer reset at each step of the exchange that cancels it.
//
// The fallback backend takes requests to backends without endpoints
// (decide) and answers in place of answers with its codes. Both go through
// ReverseProxy (engineForwards says no), which sends the fields
// ingress-nginx sends its default backends.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/router"
)

var errBodyTooLarge = errors.New("request body larger than the route's limit")

// limitedBody reads a request body of unknown length up to a limit, and
// fails past it.
type limitedBody struct {
	r    io.Reader
	left int64
	// over is set once the body passed the limit: the Transport reads on
	// a goroutine of its own.
	over atomic.Bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errBodyTooLarge
	}
	// One byte more than the limit tells a body at the limit from one past it.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		b.over.Store(true)
		return 0, errBodyTooLarge
	}
	return n, err
}

// limitedReadCloser is a limitedBody in place of a request's Body.
type limitedReadCloser struct {
	*limitedBody
	io.Closer
}

// tooLarge reports whether the body passed its limit.
func (b *limitedBody) tooLarge() bool { return b != nil && b.over.Load() }

// bodyTooLarge decides on a request body of declared length (-1: none):
// true when it passes the rule's limit, and otherwise a reader that cuts
// it at the limit when its length is unknown (nil: no need).
func bodyTooLarge(rule *router.Rule, length int64, body io.Reader) (bool, *limitedBody) {
	limit := rule.MaxRequestBody
	switch {
	case limit <= 0:
		return false, nil
	case length > limit:
		return true, nil
	case length < 0:
		return false, &limitedBody{r: body, left: limit}
	}
	return false, nil
}

// stallWatch cancels an exchange on net/http's Transport that waits
// longer than the rule's backend read or send timeout for its next step.
type stallWatch struct {
	timer      *time.Timer
	read, send time.Duration
	stalled    atomic.Bool
}

// errStalled fails an exchange whose backend stopped moving; a timeout,
// answered 504.
var errStalled = os.ErrDeadlineExceeded

// watchStalls returns req with a context that a stall cancels, and the
// watch (nil when the rule has no such timeout).
func watchStalls(req *http.Request, t *router.Timeouts) (*http.Request, *stallWatch, context.CancelFunc) {
	if t.BackendRead <= 0 && t.BackendSend <= 0 {
		return req, nil, nil
	}
	ctx, cancel := context.WithCancel(req.Context())
	w := &stallWatch{read: t.BackendRead, send: t.BackendSend}
	first := w.read
	if req.Body != nil && req.Body != http.NoBody {
		first = w.send
		req = req.WithContext(ctx)
		req.Body = &stallBody{ReadCloser: req.Body, w: w}
	} else {
		req = req.WithContext(ctx)
	}
	w.timer = time.AfterFunc(orForever(first), func() {
		w.stalled.Store(true)
		cancel()
	})
	return req, w, func() { w.timer.Stop(); cancel() }
}

// orForever is d, or a wait that never ends for none.
func orForever(d time.Duration) time.Duration {
	if d <= 0 {
		return 1<<63 - 1
	}
	return d
}

// stallBody is a request body whose reads say the backend took the last
// piece: the next may take the send timeout, and its end starts the wait
// for the response.
type stallBody struct {
	io.ReadCloser
	w *stallWatch
}

func (b *stallBody) Read(p []byte) (int, error) {
	b.w.timer.Stop()
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.w.timer.Reset(orForever(b.w.read))
	} else {
		b.w.timer.Reset(orForever(b.w.send))
	}
	return n, err
}

// stallResponse is a response body each read of which may wait the read
// timeout; closing it ends the watch.
type stallResponse struct {
	io.ReadCloser
	w   *stallWatch
	end context.CancelFunc
}

func (b *stallResponse) Read(p []byte) (int, error) {
	b.w.timer.Reset(orForever(b.w.read))
	n, err := b.ReadCloser.Read(p)
	b.w.timer.Stop()
	return n, err
}

func (b *stallResponse) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

// roundTripWatched makes the round trip of rt under the rule's backend
// read and send timeouts.
func (f *forwarder) roundTripWatched(req *http.Request, ex *exchange, rt func(*http.Request, *exchange) (*http.Response, error)) (*http.Response, error) {
	req, w, end := watchStalls(req, &ex.plan.target.Rule.Timeouts)
	if w == nil {
		return rt(req, ex)
	}
	resp, err := rt(req, ex)
	if err != nil {
		end()
		if w.stalled.Load() {
			return nil, errStalled
		}
		return nil, err
	}
	w.timer.Stop()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// The upgraded connection lives as long as the request, whose
		// end ends the context.
		return resp, nil
	}
	resp.Body = &stallResponse{ReadCloser: resp.Body, w: w, end: end}
	return resp, nil
}

// dialContext dials a backend within the connect timeout of the rule of
// the request the Transport dials for.
func (f *forwarder) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if ex, ok := ctx.Value(exchangeKey{}).(*exchange); ok && ex.plan.target != nil {
		if d := ex.plan.target.Rule.Timeouts.Connect; d > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
	}
	return f.dialer.DialContext(ctx, network, addr)
}

// usesFallback reports whether the plan's request goes to the rule's
// fallback backend, or may: those go through ReverseProxy.
func (p *plan) usesFallback() bool {
	f := p.target.Rule.Fallback
	return f != nil && (p.fallback || len(f.Codes) > 0)
}

// fallbackFields adds the fields the fallback backend gets: its own, and
// what the request was. code is the status of the answer replaced.
func fallbackFields(h http.Header, f *router.Fallback, code int, in *http.Request, originalURI bool) {
	for _, fh := range f.Headers {
		h.Set(fh.Name, fh.Value)
	}
	h.Set("X-Code", strconv.Itoa(code))
	h.Set("X-Format", in.Header.Get("Accept"))
	if originalURI {
		h.Set("X-Original-URI", in.RequestURI)
	}
}

// intercept replaces resp, the answer of the rule's backend, by the
// fallback backend's where its status is one of the fallback's codes.
func (f *forwarder) intercept(req *http.Request, resp *http.Response, ex *exchange) (*http.Response, error) {
	fb := ex.plan.target.Rule.Fallback
	if fb == nil || ex.plan.fallback || !slices.Contains(fb.Codes, resp.StatusCode) {
		return resp, nil
	}
	set := ex.sets.Get(fb.Backend.Name)
	if set == nil || set.Len() == 0 {
		return resp, nil
	}
	// Not drained: the answer replaced may be long.
	resp.Body.Close()
	ex.host.End()
	ex.open = false
	out := req.Clone(req.Context())
	out.Body, out.ContentLength, out.GetBody = http.NoBody, 0, nil
	out.Header.Del("Transfer-Encoding")
	out.URL.Path, out.URL.RawPath, out.URL.RawQuery = "/", "", ""
	fallbackFields(out.Header, fb, resp.StatusCode, ex.in, true)
	ex.plan.fallback, ex.plan.backend, ex.plan.set = true, &fb.Backend, set
	ex.protocol = fb.Backend.Protocol
	out.URL.Scheme = upstreamScheme(ex.protocol)
	return f.attempt(out, ex)
}
