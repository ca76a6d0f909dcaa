package pipeline

// The bridge: requests that net/http's HTTP/2 server and the HTTP/3 server
// take, forwarded to HTTP/1.1 backends over the engine's pool (upstream.Pool)
// rather than through httputil.ReverseProxy and net/http's Transport. On
// bench/run.sh's h2-tls, a third of hostgate's core went to the Transport
// beyond its reads and writes: two goroutines per backend connection
// handing each exchange over channels, and the request and response
// copied field by field.
//
// It takes what the engine forwards itself (engineForwards), from requests
// whose body length is known, or found to be 0 (lengthKnown): the rest
// (bodies of unknown length, Expect on HTTP/3, extended CONNECT) goes on
// through ReverseProxy. HTTP/2's server answers Expect: 100-continue itself
// and takes the field off.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hostgate/hostgate/proxy/h1wire"
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

// bridgeState is the bridge's per-request state, pooled so that a request
// allocates little beyond what the server gave it.
type bridgeState struct {
	resp  h1wire.Head
	rbody h1wire.BodyReader
	// req is the request forwarded, whose stream the client may reset.
	req *http.Request
}

// ClientGone is what the backend connection's watch asks
// (upConn.watchClient): net/http's HTTP/2 server and quic-go cancel a
// request's context when its client resets the stream or leaves.
func (b *bridgeState) ClientGone() bool { return b.req.Context().Err() != nil }

var bridgeStates = sync.Pool{New: func() any { return new(bridgeState) }}

// bridges reports whether the bridge forwards r as ex plans.
func (f *forwarder) bridges(r *http.Request, ex *exchange) bool {
	// net/http's HTTP/2 server takes any :method without a line break,
	// which written as is could make another request line.
	return r.ProtoMajor >= 2 && f.s.cfg.Bridge &&
		(r.ContentLength >= 0 || r.ProtoMajor == 3 && usuallyBodiless(r.Method)) && len(r.Header["Expect"]) == 0 && r.Method != http.MethodConnect && h1wire.IsToken(r.Method) &&
		engineForwards(&ex.plan, r.Header) &&
		(ex.plan.path != "" || h1wire.ValidPath(r.URL.EscapedPath())) && h1wire.ValidQuery(r.URL.RawQuery) &&
		(r.Host == "" || h1wire.ValidHost(r.Host))
}

// usuallyBodiless lists the methods whose body net/http's Transport probes
// for when its length is unknown.
func usuallyBodiless(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}

// bodyProbeWait bounds lengthKnown's wait for a body the client announced
// with Content-Type, as net/http's Transport bounds its probe
// (probeRequestBody).
const bodyProbeWait = 200 * time.Millisecond

// arrivedProbeWait is lengthKnown's wait for a body nothing announced: no
// wait in effect, but a deadline already past would not do, as quic-go's
// Read fails on one before it takes the bytes, or the FIN, already
// received (ReceiveStream.readImpl checks the deadline first).
const arrivedProbeWait = time.Millisecond

// lengthKnown settles the length of a body the client did not declare:
// quic-go gives an HTTP/3 GET without Content-Length a length of -1, so the
// body of such a method is read for its end, as net/http's Transport
// probes it. A body found after all is put back whole, for ReverseProxy.
//
// Some clients keep a GET's stream open until they have the response, so
// the read is bounded, by a read deadline on the stream rather than, as
// the Transport's, by a goroutine left reading: nothing stays blocked, and
// a FIN or body that came with the HEADERS ends the read at once, before
// quic-go arms a timer. A stream still open and silent at the deadline is
// taken for bodiless: a client that sends nothing until it has the answer
// sends no body a backend could wait for, and RFC 9114 section 4.1 lets
// the server answer first and stop reading (quic-go does, with H3_NO_ERROR).
// A body later than that is not forwarded.
//
// Only the methods usuallyBodiless lists come here, and the content of
// GET, HEAD and DELETE has no defined semantics (RFC 9110 section 9.3),
// so a request of theirs without Content-Type, which a sender of content
// should send (section 8.3; for OPTIONS it must, 9.3.7), is not waited for
// beyond what has arrived: an open stream would otherwise cost each such
// request the whole bound. With Content-Type, a body is waited for as the
// Transport would.
//
// net/http's HTTP/2 server gives -1 only to a stream its client left open,
// which may stay open as long as the client streams: such a request goes
// to ReverseProxy at once, whose Transport waits for the end no more than
// 200ms. deadline is the read deadline the stream had before the probe.
func lengthKnown(w http.ResponseWriter, r *http.Request, deadline time.Time) bool {
	if r.ContentLength >= 0 {
		return true
	}
	rc := http.NewResponseController(w)
	probeWait := arrivedProbeWait
	if len(r.Header["Content-Type"]) != 0 {
		probeWait = bodyProbeWait
	}
	wait := time.Now().Add(probeWait)
	if !deadline.IsZero() && deadline.Before(wait) {
		wait = deadline
	}
	if rc.SetReadDeadline(wait) != nil {
		// No bounded read here: ReverseProxy's Transport probes.
		return false
	}
	probe := make([]byte, 1)
	n, err := r.Body.Read(probe)
	if n == 0 && (err == io.EOF || errors.Is(err, os.ErrDeadlineExceeded)) {
		// Nothing reads the body again: the deadline can stay.
		r.ContentLength = 0
		return true
	}
	_ = rc.SetReadDeadline(deadline)
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(probe[:n]), r.Body), r.Body}
	return false
}

// bridge forwards r as the engine would (h1conn.forward): failures are
// answered 502, or 504 past the deadline, and a response cut short resets
// the client's stream. It reports false, having sent nothing, for a body
// that turned out to be there and of unknown length.
func (f *forwarder) bridge(w http.ResponseWriter, r *http.Request, ex *exchange) bool {
	s := f.s
	clientDeadline := ex.clientDeadline()
	if !clientDeadline.IsZero() {
		_ = http.NewResponseController(w).SetReadDeadline(clientDeadline)
	}
	if !lengthKnown(w, r, clientDeadline) {
		return false
	}
	// The server made the header for this request alone, and nothing
	// reads it after the backend's answer: it is edited in place.
	h := r.Header
	setForwarded(r, h, ex)
	eachFilter(&ex.plan, router.FilterRequestHeaderModifier, func(flt *router.Filter) { modifyHeader(h, flt.RequestHeaders) })

	b := bridgeStates.Get().(*bridgeState)
	b.req = r
	defer func() {
		b.resp.Reset("")
		b.rbody.Start(nil, h1wire.BodyNone, 0)
		b.req = nil
		bridgeStates.Put(b)
	}()
	var informational func(*h1wire.Head) error
	if f.s.relaysInformational(r) {
		informational = func(resp *h1wire.Head) error { relayInformational(w, resp); return nil }
	}
	unsent := false
	replayable := r.ContentLength == 0 && Repeatable(r.Method, h.Get("Idempotency-Key"))
	send := func(uc *upstream.Conn) (bool, error) {
		if err := ex.arm(uc); err != nil {
			return false, err
		}
		if b.ClientGone() {
			// A stream reset before its request went out (a flood of
			// them is what the guard's budget stops) is not sent.
			return false, upstream.ErrClientGone
		}
		writeRequestLine(uc.Writer, ex, r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Host)
		teTrailers := writeRequestFields(uc.Writer, h)
		EndRequestHead(uc.Writer, r.Method, r.ContentLength, false, teTrailers)
		// A client that leaves ends the waits for the backend within
		// clientCheckInterval, as on the engine, until relayResponse
		// has read the response. Without a body, the watch starts
		// before the request goes, as the write waits for the answer.
		if r.ContentLength == 0 {
			uc.WatchClient(b, ex.attemptDeadline)
			if err := uc.FlushAwait(); err != nil {
				return false, err
			}
		} else {
			// A body is sent once, after the connect: only a failed
			// connect goes to another endpoint with it. A write
			// blocked on a backend that does not read its upload is no
			// wait the watch can end: a client that leaves cuts it at
			// once. Only uploads pay for this hook (about 5% of
			// h2-tls's requests/s when every request did). The cut
			// sets the socket's deadline, not uc's, which also notes
			// what the pool needs to know, as the write under way
			// may at the same time.
			endCut := context.AfterFunc(r.Context(), func() { _ = uc.Conn.SetDeadline(time.Unix(1, 0)) })
			early, err := SendBody(uc, r.Body, false)
			if !endCut() {
				// The client left, and the cut spoiled the connection.
				return false, upstream.ErrClientGone
			}
			if err != nil && !early {
				return false, err
			}
			uc.WatchClient(b, ex.attemptDeadline)
			if err != nil {
				// The backend answered before it took the whole body.
				if ReadFinalResponse(uc.Reader, &b.resp, true, informational) == nil {
					// The rest of the request is not on the connection.
					unsent = true
					return true, nil
				}
				return false, err
			}
		}
		if _, err := uc.Reader.Peek(1); err != nil {
			return false, err
		}
		return true, ReadFinalResponse(uc.Reader, &b.resp, true, informational)
	}
	uc, status, _ := s.sendH1(ex, r.ContentLength == 0, replayable, b.ClientGone, &b.resp, r.Method, send)
	if uc == nil {
		// A client that left gets no answer (status 0), and the request
		// counts as aborted.
		if status != 0 {
			WriteError(w, r, status)
		}
		return true
	}
	ex.open = true
	f.relayResponse(w, r, uc, ex, b, !unsent)
	return true
}

// writeRequestFields writes the fields of h that go on to the backend,
// and reports whether the client accepts trailers.
func writeRequestFields(bw *bufio.Writer, h http.Header) (teTrailers bool) {
	for name, values := range h {
		switch name {
		case "Te":
			teTrailers = h1wire.HasToken(values, "trailers")
			continue
		case "Host", "Content-Length", "Transfer-Encoding", "Connection":
			// Owned by the framing, or not a field of HTTP/2 and 3.
			continue
		case "Forwarded":
			// Dropped as ReverseProxy drops it: the client's word on
			// where it came from is the X-Forwarded-* fields', trusted
			// or replaced.
			continue
		case "Cookie":
			// HTTP/2 and 3 may split it; HTTP/1.1 has one (RFC 9113
			// section 8.2.3).
			values = []string{strings.Join(values, "; ")}
		}
		if h1wire.IsHopByHop(name) {
			continue
		}
		for _, v := range values {
			bw.WriteString(name)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	return teTrailers
}

// relaysInformational reports whether the 1xx responses a backend sends
// before its answer (103 Early Hints) go on to r's client: not on
// net/http's HTTP/2 server (Config.StdlibHTTP2), whose WriteHeader sends
// a 1xx from the map Header returns, the one the answer's fields go into,
// and returns on a stream reset or a connection gone without waiting for
// the goroutine writing the frame, which may be encoding that map still
// (serverConn.writeHeaders). The clear after the 1xx, here and in
// ReverseProxy, and the answer's fields raced with that read: a fatal
// "concurrent map iteration and map write" at worst. ReverseProxy still
// edits the map around the 1xx that recorder drops, which nothing of
// net/http's reads then. hostgate's engine, net/http's HTTP/1.1 server
// and quic-go encode a 1xx before WriteHeader returns.
func (s *Shared) relaysInformational(r *http.Request) bool {
	return r.ProtoMajor != 2 || !s.cfg.StdlibHTTP2
}

// relayInformational relays a 1xx response (103 Early Hints): its fields
// go out with it, and the header is as it was after.
func relayInformational(w http.ResponseWriter, resp *h1wire.Head) {
	h := w.Header()
	before := h.Clone()
	copyFields(h, resp.Fields, 0)
	w.WriteHeader(resp.Status)
	clear(h)
	maps.Copy(h, before)
}

// copyFields adds the fields that are not hop-by-hop to h. The values of
// fields new to h share one allocation, each slice's capacity ending with
// it, so that adding to one copies it. The allocation has spare values
// more, returned for the caller's fields of its own.
func copyFields(h http.Header, fields h1wire.Fields, spare int) []string {
	values := make([]string, len(fields)+spare)
	for i := range fields {
		f := &fields[i]
		if f.Hop {
			continue
		}
		name := textproto.CanonicalMIMEHeaderKey(f.Name)
		if prior, ok := h[name]; ok {
			h[name] = append(prior, f.Value)
			continue
		}
		values[i] = f.Value
		h[name] = values[i : i+1 : i+1]
	}
	return values[len(fields):]
}

// relayResponse writes the response whose head is in b, streaming its
// body, and returns uc to the pool, which ends the watch on the client
// that send set, when it was read whole.
func (f *forwarder) relayResponse(w http.ResponseWriter, r *http.Request, uc *upstream.Conn, ex *exchange, b *bridgeState, requestSent bool) {
	resp := &b.resp
	mode := resp.BodyMode(r.Method)
	reusable := resp.Reusable(mode) && requestSent

	f.s.serverField(&resp.Fields)
	editResponse(&ex.plan, &resp.Fields)
	h := w.Header()
	// The Server ServeHTTP put there gives way to the response's.
	delete(h, "Server")
	length := copyFields(h, resp.Fields, 1)
	if resp.ContentLength >= 0 && mode != h1wire.BodyChunked {
		length[0] = strconv.FormatInt(resp.ContentLength, 10)
		h["Content-Length"] = length
	}
	w.WriteHeader(resp.Status)
	// Bodies of unknown length are often streams (server-sent events):
	// the head goes out at once when nothing of the body is here, as the
	// first piece may be long in coming, and each piece as it comes.
	var flusher *http.ResponseController
	if mode == h1wire.BodyChunked || mode == h1wire.BodyUntilClose {
		flusher = http.NewResponseController(w)
		if uc.Reader.Buffered() == 0 {
			_ = flusher.Flush()
		}
	}

	b.rbody.Start(uc.Reader, mode, max(resp.ContentLength, 0))
	b.rbody.KeepTrailer = true
	var readErr, writeErr error
	if mode != h1wire.BodyNone {
		buf := h1Buffers.Get().(*[]byte)
		readErr, writeErr = copyToClient(w, &b.rbody, *buf, flusher)
		h1Buffers.Put(buf)
	}
	if readErr != nil || writeErr != nil || !reusable {
		uc.Close()
	} else {
		f.s.h1.Put(ex.host.Address(), uc)
	}
	if readErr != nil && writeErr == nil {
		// As ReverseProxy does: the client's stream is reset, so that
		// the body cut short is not taken for the whole.
		panic(http.ErrAbortHandler)
	}
	if len(b.rbody.Trailer) == 0 {
		return
	}
	// A trailer field that does not parse is dropped, as net/http's
	// Transport drops a malformed trailer section.
	for line := range strings.SplitSeq(string(b.rbody.Trailer), "\r\n") {
		name, value, ok := strings.Cut(line, ":")
		value = strings.Trim(value, " \t")
		if ok && h1wire.IsToken(name) && h1wire.ValidValue(value) {
			name = http.TrailerPrefix + textproto.CanonicalMIMEHeaderKey(name)
			h[name] = append(h[name], value)
		}
	}
}

// copyToClient copies a response body to w through buf, flushing each
// piece through flusher, if set.
func copyToClient(w http.ResponseWriter, src *h1wire.BodyReader, buf []byte, flusher *http.ResponseController) (readErr, writeErr error) {
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil, werr
			}
			if flusher != nil {
				if werr := flusher.Flush(); werr != nil {
					return nil, werr
				}
			}
		}
		if err != nil {
			if err == io.EOF {
				return nil, nil
			}
			return err, nil
		}
	}
}
