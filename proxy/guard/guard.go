package guard

// The connection guard reads what a client sends before net/http or the
// HTTP/2 server does, to refuse what they accept but should not:
//
//   - HTTP/1.1 framing that two parsers could read differently (request
//     smuggling, RFC 9112 sections 2.2, 5, 6.1, 7.1): Content-Length with
//     Transfer-Encoding (net/http drops the Content-Length and keeps the
//     connection, golang/go#80942), repeated or malformed Content-Length, a
//     Transfer-Encoding other than chunked or on HTTP/1.0, obs-fold, bare
//     LF or CR, field names that are not tokens, control characters in
//     field values, malformed chunk sizes and chunk lines.
//   - HTTP/2 rapid reset (CVE-2023-44487): streams the client resets before
//     the response started. Go's server only bounds how many handlers run
//     at once, so a client that opens and resets streams in a loop keeps a
//     core and the backends busy without end.
//   - HTTP/2 frames that carry no bytes and do nothing (CVE-2019-9518):
//     Go's server reads empty DATA and CONTINUATION frames and PRIORITY
//     without end, at no cost to the client.
//   - HTTP/2 settings repeated in one SETTINGS frame, which Go's server
//     refuses though RFC 9113 has them processed in order: all but the
//     last are renamed to identifiers the server ignores.
//   - HTTP/2 requests with connection-specific header fields or a TE
//     other than "trailers" (RFC 9113 section 8.2.2), which Go's server
//     answers 400 where the RFC calls them malformed: a protocol error.
//
// The HTTP/2 checks apply to net/http's server (--http2-engine=stdlib):
// hostgate's own engine (proxy/h2) makes the same ones as it reads, and
// the guard leaves its connections once it sees their preface
// (LeaveFrames), so that their frames are read once.
//
// After an Upgrade request it watches the answer: a 101 for h2c switches
// both directions to HTTP/2 frames, another 101 (WebSocket) ends the
// inspection, anything else goes on with HTTP/1.1. Listeners hand it the
// plaintext of TLS connections (Listener terminates TLS).
//
// It is a streaming state machine over the bytes as they pass, so it
// buffers nothing and costs a loop over each request head and chunk line;
// bodies of known length are skipped whole.
//
// An HTTP/1.1 violation is not answered here, as a response of net/http
// may be on its way on the same connection. The guard hands net/http a
// poisoned request instead (a NUL byte, which no request line or field may
// hold) in place of the offending request when it started in the same read,
// or from the offending byte otherwise; net/http answers 400 with
// "Connection: close" after the responses before it, then the guard reports
// end of stream. The offending request never reaches a handler, so no
// backend sees it, unless its head had already been handed over (a chunk
// error after the head, in a later read): its body then fails to read and
// the request to the backend is aborted.
//
// An HTTP/2 connection over the reset or empty-frame budget gets
// GOAWAY(ENHANCE_YOUR_CALM) and its reads fail, which closes it. A
// malformed header block gets GOAWAY(PROTOCOL_ERROR) the same way, before
// the server has read the block whole, so no handler sees it. RFC 9113
// section 8.1.1 asks for a stream error, and section 5.4 allows a
// connection error in its place:
// resetting one stream would mean handing the server a block that decodes
// to a request it resets, with its HPACK table in step with the client's,
// which no rewrite of a block in place can promise (a Huffman string of
// the same length and decoded size may not exist). Only a broken or
// hostile client sends these fields: they are what HTTP/2-to-HTTP/1
// request smuggling is made of.

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
)

// Rapid-reset budget: a connection may reset ResetBurst streams before
// their response started, then ResetRate per second more. A browser
// cancelling navigations or a gRPC client hitting deadlines stays far
// below; a flood is cut after ResetBurst streams.
const (
	ResetBurst = 100
	ResetRate  = 10
	// EmptyFrameBurst is how many more frames that carry no bytes and do
	// nothing (empty DATA without END_STREAM, empty header block
	// fragments without END_HEADERS, PRIORITY) a connection may send
	// than frames that do work (DATA with bytes or END_STREAM, a header
	// block ended). Real clients send a few: PRIORITY frames for
	// Firefox's stream groups, an empty DATA frame where a stream's
	// writer flushed nothing, each next to requests and bodies that give
	// the budget back; curl, grpc-go and Go's Transport end streams with
	// END_STREAM on a frame of their own but send no frames that do
	// nothing. A thousand is far above any of them and caps a flood
	// (CVE-2019-9518) at 9 KiB of frames before the work it rides on.
	EmptyFrameBurst = 1000
	// respSlots remembers, per connection, which streams' responses
	// started. A stream maps to slot (id/2) mod respSlots, so two streams
	// share a slot only if respSlots streams were opened between them
	// while the first was still open, more than any MaxConcurrentStreams
	// we accept.
	respSlots = 1024
)

// poison is what net/http reads in place of a refused request.
const poison = "\x00\r\n\r\n"

var (
	errCalm      = errors.New("HTTP/2 connection closed: too many streams reset before their response (rapid reset)")
	errEmpty     = errors.New("HTTP/2 connection closed: too many frames that carry nothing (empty frame flood)")
	errMalformed = errors.New("HTTP/2 connection closed: malformed header block")
)

// Reader states. HTTP/1.1 states come first.
const (
	stLine        uint8 = iota // in the request line
	stLineLF                   // CR seen at the end of the request line
	stFieldStart               // at the start of a field line, or the empty line
	stName                     // in a field name
	stValue                    // in a field value
	stValueLF                  // CR seen at the end of a field line
	stHeadLF                   // CR of the empty line that ends the head
	stBody                     // in a body of known length
	stChunkSize                // in a chunk size
	stChunkExt                 // in chunk extensions
	stChunkSizeLF              // CR seen at the end of the chunk line
	stChunkData                // in chunk data
	stChunkDataCR              // at the CR after chunk data
	stChunkDataLF              // at the LF after chunk data
	stUpgrading                // waiting for the answer to an Upgrade request
	stPreface                  // in the HTTP/2 client preface
	stFrames                   // in HTTP/2 frames
	stPassthrough              // another protocol (WebSocket): not inspected
	stRefused                  // a violation was found: serve poison, then EOF
	stGoneAway                 // HTTP/2 ended with GOAWAY: reads fail with h2err
)

// Field kinds the guard looks at.
const (
	fieldOther uint8 = iota
	fieldContentLength
	fieldTransferEncoding
	fieldUpgrade
)

// Write-side states, stored atomically as the writer and reader of a
// connection run on different goroutines.
const (
	wrHTTP1   uint32 = iota // responses to HTTP/1.1 requests
	wrUpgrade               // the answer to an Upgrade request comes next
	wrFrames                // HTTP/2 frames
	wrOther                 // another protocol: not inspected
	wrClosed                // the guard hung up: nothing more is written
)

const H2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Conn is a client connection seen through the guard.
type Conn struct {
	net.Conn
	// now is the clock of the reset budget, time.Now but in tests.
	now func() time.Time

	// writes bounds how long one write to the client may wait for it to
	// read (Write).
	writes WriteBound

	// Reader state, owned by whichever goroutine reads (one at a time).
	st       uint8
	field    uint8
	digits   bool // the Content-Length value has digits
	owsAfter bool // the Content-Length value had white space after digits
	http10   bool
	trailer  bool // the field lines are a chunked trailer section
	sawCL    bool
	sawTE    bool
	chunked  bool
	upgrade  bool
	nameLen  int
	valLen   int
	tail     uint64   // the last 8 bytes of the request line
	name     [17]byte // lower-cased start of the field name
	val      [8]byte  // lower-cased start of a Transfer-Encoding value
	remain   int64    // Content-Length, or body or chunk bytes left
	chunkLen int      // hex digits of the chunk size
	poisoned int      // poison bytes already handed out
	begun    bool     // bytes of the current request were read
	served   bool     // a request was read whole
	// pre counts bytes of the HTTP/2 preface read; -1 once the connection
	// is known not to start with it.
	pre    int
	alpnH2 bool // the client chose h2 in the TLS handshake

	// HTTP/2 reader state.
	in      frameScanner
	hb      headerBlock
	resets  float64 // reset budget left
	empties int     // empty-frame budget left (EmptyFrameBurst)
	h2err   error   // why reads fail after the guard's GOAWAY
	// settingsNext says the next read starts with a SETTINGS payload.
	settingsNext bool
	refilled     time.Time

	// Writer state.
	wr        atomic.Uint32
	out       frameScanner
	responded *[respSlots]atomic.Uint32

	// writing and away hand the GOAWAY to exactly one of the writer and
	// the reader that ends the connection: writing is 1 during a Write
	// and 2 once the GOAWAY was written. awayCode is its error code.
	writing  atomic.Uint32
	away     atomic.Bool
	awayCode atomic.Uint32
	// lastStream is the highest stream the client opened, for GOAWAY.
	lastStream atomic.Uint32
}

// newGuardConn guards c, which starts with an HTTP/1.1 request or the
// HTTP/2 client preface.
func newGuardConn(c net.Conn) *Conn {
	return &Conn{Conn: c, now: time.Now, st: stLine}
}

func (g *Conn) Read(p []byte) (int, error) {
	switch g.st {
	case stRefused:
		return g.readPoison(p)
	case stGoneAway:
		return 0, g.h2err
	}
	n, err := g.Conn.Read(p)
	if n == 0 {
		g.answerPlaintext(err)
		return n, err
	}
	if g.st == stPassthrough {
		return n, err
	}
	if g.pre == 0 && !g.begun {
		// The first bytes: a handshake, if any, is done.
		if tc, ok := g.Conn.(*tls.Conn); ok {
			g.alpnH2 = tc.ConnectionState().NegotiatedProtocol == "h2"
		}
	}
	if g.st >= stPreface {
		if !g.frames(p[:n]) {
			return g.drain(p)
		}
		return n, err
	}
	if cut, ok := g.http1(p[:n]); !ok {
		if g.st == stGoneAway {
			// HTTP/2 began in this read and ended in it.
			return g.drain(p)
		}
		g.st = stRefused
		if cut == 0 {
			return g.readPoison(p)
		}
		return cut, nil
	}
	return n, err
}

// answerPlaintext answers an HTTP request sent to a TLS listener, which
// fails the handshake, as net/http would had it terminated TLS.
func (g *Conn) answerPlaintext(err error) {
	re, ok := errors.AsType[tls.RecordHeaderError](err)
	if !ok || re.Conn == nil {
		return
	}
	switch string(re.RecordHeader[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
	}
}

// hangUp makes a refusal close the connection without an answer, for a
// client that does not speak HTTP/1.1: what net/http read of its request
// so far gets a 400 that is not sent. It is only for the first request of
// a connection, which no response can be owed before.
func (g *Conn) hangUp() {
	g.poisoned = len(poison)
	g.wr.Store(wrClosed)
}

func (g *Conn) readPoison(p []byte) (int, error) {
	if g.poisoned == len(poison) {
		return 0, io.EOF
	}
	n := copy(p, poison[g.poisoned:])
	g.poisoned += n
	return n, nil
}

// http1 runs the HTTP/1.1 reader over b. On a violation it returns false
// and how many bytes of b net/http may have before the poison.
func (g *Conn) http1(b []byte) (int, bool) {
	// msgStart is where the current request started in b, and headEnd
	// where its head ended (at the final LF), or -1 if not in b.
	msgStart, headEnd := -1, -1
	if g.st == stLine && !g.begun {
		msgStart = 0
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch g.st {
		case stLine:
			g.begun = true
			if g.pre >= 0 {
				// At the start of the connection: the HTTP/2 preface?
				if c == H2Preface[g.pre] {
					g.pre++
					if g.pre == len(H2Preface) {
						g.startFrames()
						if !g.frames(b[i+1:]) {
							return 0, false
						}
						return len(b), true
					}
					continue
				}
				// Not the preface. A client that chose h2 by ALPN gets no
				// HTTP/1.1 answer (RFC 9113 section 3.4).
				if g.alpnH2 {
					g.hangUp()
					return refuse(msgStart, headEnd, i)
				}
				// Past "PRI * HTTP/2.0" and its line end, which net/http
				// would take for a request line: poison it there.
				if line := len("PRI * HTTP/2.0"); g.pre > line {
					return max(0, i-(g.pre-line)), false
				}
				// The bytes matched so far were the start of a request
				// line.
				for _, pc := range []byte(H2Preface[:g.pre]) {
					g.tail = g.tail<<8 | uint64(pc)
				}
				g.pre = -1
			}
			switch {
			case c == '\r':
				g.st = stLineLF
			case c == '\n' || c < ' ' || c == 0x7f:
				return refuse(msgStart, headEnd, i)
			default:
				// Skip the run of plain bytes, keeping the last 8.
				j := i + 1
				for j < len(b) && b[j] >= ' ' && b[j] != 0x7f {
					j++
				}
				for _, x := range b[max(i, j-8):j] {
					g.tail = g.tail<<8 | uint64(x)
				}
				i = j - 1
			}
		case stLineLF:
			if c != '\n' {
				return refuse(msgStart, headEnd, i)
			}
			switch g.tail {
			case versionHTTP11:
				g.http10 = false
			case versionHTTP10:
				g.http10 = true
			default:
				// Not HTTP/1.x, whose framing the guard would not know.
				// As the first request, it is a client that speaks
				// something else, such as HTTP/2 with a broken preface
				// (RFC 9113 section 3.4, h2spec 3.5/2): no answer.
				if !g.served {
					g.hangUp()
				}
				return refuse(msgStart, headEnd, i)
			}
			g.st = stFieldStart
		case stFieldStart:
			switch {
			case c == '\r':
				g.st = stHeadLF
			case c == ' ' || c == '\t':
				// obs-fold (RFC 9112 section 5.2), or white space before
				// the first field name (section 2.2).
				return refuse(msgStart, headEnd, i)
			case !IsTokenByte(c):
				return refuse(msgStart, headEnd, i)
			default:
				g.st = stName
				g.name[0] = c | 0x20
				g.nameLen = 1
			}
		case stName:
			for ; i < len(b) && IsTokenByte(b[i]); i++ {
				if g.nameLen < len(g.name) {
					g.name[g.nameLen] = b[i] | 0x20
				}
				g.nameLen++
			}
			switch {
			case i == len(b):
			case b[i] == ':':
				g.startValue()
			default:
				// Spaces, control characters, and anything else that is
				// not a token, including white space before the colon.
				return refuse(msgStart, headEnd, i)
			}
		case stValue:
			// Skip plain value bytes of fields the guard ignores.
			if g.field == fieldOther {
				for i < len(b) && b[i] >= ' ' && b[i] != 0x7f {
					i++
				}
				if i == len(b) {
					break
				}
				c = b[i]
			}
			switch {
			case c == '\r':
				g.st = stValueLF
			case (c < ' ' && c != '\t') || c == 0x7f:
				return refuse(msgStart, headEnd, i)
			case !g.value(c):
				return refuse(msgStart, headEnd, i)
			}
		case stValueLF:
			if c != '\n' || !g.endField() {
				return refuse(msgStart, headEnd, i)
			}
			g.st = stFieldStart
		case stHeadLF:
			if c != '\n' {
				return refuse(msgStart, headEnd, i)
			}
			if g.trailer {
				g.endMessage()
				msgStart, headEnd = i+1, -1
				break
			}
			switch {
			case g.sawTE && (g.sawCL || g.http10 || !g.chunked):
				// RFC 9112 section 6.1: both framings, or chunked on a
				// version that predates it, cannot be read safely; a
				// coding other than chunked (last) has no known length.
				return refuse(msgStart, headEnd, i)
			case g.sawTE:
				g.st = stChunkSize
				g.remain, g.chunkLen = 0, 0
				headEnd = i
			case g.remain > 0:
				g.st = stBody
				headEnd = i
			default:
				g.endMessage()
				msgStart, headEnd = i+1, -1
			}
		case stBody:
			skip := min(g.remain, int64(len(b)-i))
			g.remain -= skip
			i += int(skip) - 1
			if g.remain == 0 {
				g.endMessage()
				msgStart, headEnd = i+1, -1
			}
		case stChunkSize:
			if d, ok := HexDigit(c); ok {
				// 15 hex digits bound a size below 2^60, which fits.
				if g.chunkLen == 15 {
					return refuse(msgStart, headEnd, i)
				}
				g.remain = g.remain<<4 | int64(d)
				g.chunkLen++
				break
			}
			if g.chunkLen == 0 {
				return refuse(msgStart, headEnd, i)
			}
			switch c {
			case '\r':
				g.st = stChunkSizeLF
			case ';', ' ', '\t':
				g.st = stChunkExt
			default:
				return refuse(msgStart, headEnd, i)
			}
		case stChunkExt:
			switch {
			case c == '\r':
				g.st = stChunkSizeLF
			case (c < ' ' && c != '\t') || c == 0x7f:
				return refuse(msgStart, headEnd, i)
			}
		case stChunkSizeLF:
			if c != '\n' {
				return refuse(msgStart, headEnd, i)
			}
			if g.remain == 0 {
				g.trailer = true
				g.st = stFieldStart
			} else {
				g.st = stChunkData
			}
		case stChunkData:
			skip := min(g.remain, int64(len(b)-i))
			g.remain -= skip
			i += int(skip) - 1
			if g.remain == 0 {
				g.st = stChunkDataCR
			}
		case stChunkDataCR:
			if c != '\r' {
				return refuse(msgStart, headEnd, i)
			}
			g.st = stChunkDataLF
		case stChunkDataLF:
			if c != '\n' {
				return refuse(msgStart, headEnd, i)
			}
			g.st = stChunkSize
			g.remain, g.chunkLen = 0, 0
		case stUpgrading:
			switch g.wr.Load() {
			case wrHTTP1:
				// The upgrade was declined; this is the next request.
				g.st = stLine
				msgStart, headEnd = i, -1
				i--
				continue
			case wrFrames:
				g.st = stPreface
				g.pre = 0
				g.resets, g.refilled = ResetBurst, g.now()
				if !g.frames(b[i:]) {
					return 0, false
				}
				return len(b), true
			case wrOther:
				g.st = stPassthrough
				return len(b), true
			}
			// Bytes before the answer: a client must wait for 101 before
			// speaking the new protocol (RFC 9110 section 7.8), and one
			// that sends another request meanwhile is pipelining past a
			// request that may end HTTP/1.1 on this connection.
			return refuse(msgStart, headEnd, i)
		}
	}
	return len(b), true
}

// refuse reports a violation at b[i] and where to cut b: where the
// request started, else before the end of its head, so that net/http
// reads poison in the head; else, the head having been handed over in an
// earlier read, at the violation.
func refuse(msgStart, headEnd, i int) (int, bool) {
	switch {
	case msgStart >= 0:
		return msgStart, false
	case headEnd >= 0:
		return headEnd, false
	}
	return i, false
}

// versionHTTP11 and versionHTTP10 are the last 8 bytes of a request line
// as Conn.tail holds them.
var (
	versionHTTP11 = binary.BigEndian.Uint64([]byte("HTTP/1.1"))
	versionHTTP10 = binary.BigEndian.Uint64([]byte("HTTP/1.0"))
)

func (g *Conn) startValue() {
	g.st = stValue
	g.field = fieldOther
	g.valLen, g.digits, g.owsAfter = 0, false, false
	if g.trailer || g.nameLen > len(g.name) {
		return
	}
	switch string(g.name[:g.nameLen]) {
	case "content-length":
		g.field = fieldContentLength
		g.remain = 0
	case "transfer-encoding":
		g.field = fieldTransferEncoding
	case "upgrade":
		g.field = fieldUpgrade
	}
}

// value takes one byte of a field value and reports whether it is valid.
func (g *Conn) value(c byte) bool {
	switch g.field {
	case fieldContentLength:
		switch {
		case c >= '0' && c <= '9':
			// A list ("5, 5") or digits after white space are refused:
			// only a single number has one reading. 18 digits fit.
			if g.owsAfter || g.valLen == 18 {
				return false
			}
			g.remain = g.remain*10 + int64(c-'0')
			g.digits = true
			g.valLen++
		case c == ' ' || c == '\t':
			g.owsAfter = g.digits
		default:
			return false
		}
	case fieldTransferEncoding:
		if c == ' ' || c == '\t' {
			g.owsAfter = g.valLen > 0
			return true
		}
		if g.owsAfter {
			// White space inside: not the single token "chunked", which
			// a length past any token's tells endField.
			g.valLen = len(g.val) + 1
		}
		if g.valLen < len(g.val) {
			g.val[g.valLen] = c | 0x20
		}
		g.valLen++
	}
	return true
}

// endField ends a field line and reports whether it is valid.
func (g *Conn) endField() bool {
	switch g.field {
	case fieldContentLength:
		// Repeated, even with the same value: RFC 9110 section 8.6
		// lets a recipient take that, but not every parser behind us does.
		if !g.digits || g.sawCL {
			return false
		}
		g.sawCL = true
	case fieldTransferEncoding:
		if g.sawTE {
			return false
		}
		g.sawTE = true
		g.chunked = g.valLen == len("chunked") && string(g.val[:7]) == "chunked"
	case fieldUpgrade:
		g.upgrade = true
	}
	return true
}

// endMessage readies the reader for the next request.
func (g *Conn) endMessage() {
	upgrade := g.upgrade
	g.served = true
	g.st = stLine
	g.tail, g.remain = 0, 0
	g.begun, g.http10, g.trailer, g.sawCL, g.sawTE, g.chunked, g.upgrade = false, false, false, false, false, false, false
	if upgrade {
		g.st = stUpgrading
		g.wr.Store(wrUpgrade)
	}
}

func IsTokenByte(c byte) bool {
	return c < 0x80 && tokenTable[c]
}

// tokenTable holds the tchar of RFC 9110 section 5.6.2.
var tokenTable = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

func HexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// startFrames switches a connection that sent the HTTP/2 preface to
// reading frames, in both directions.
func (g *Conn) startFrames() {
	g.st = stFrames
	g.resets, g.refilled = ResetBurst, g.now()
	g.empties = EmptyFrameBurst
	g.responded = new([respSlots]atomic.Uint32)
	g.wr.Store(wrFrames)
}

// frames runs the HTTP/2 reader over b and reports whether the connection
// goes on: false once it went away (over its reset budget, or a malformed
// header block).
func (g *Conn) frames(b []byte) bool {
	if g.st == stPreface {
		// The HTTP/2 server checks the preface; here it is skipped.
		n := min(len(b), len(H2Preface)-g.pre)
		g.pre += n
		b = b[n:]
		if g.pre < len(H2Preface) {
			return true
		}
		g.st = stFrames
	}
	if g.settingsNext && int64(len(b)) >= g.in.remain {
		dedupeSettings(b[:g.in.remain])
	}
	g.settingsNext = false
	if g.hb.inFrame {
		// The rest of a header block frame begun in an earlier read.
		var code uint32
		if b, code = g.fragment(b); code != 0 {
			return g.goAway(code, errMalformed)
		}
	}
	for b, ok := g.in.next(b); ok; b, ok = g.in.next(b) {
		stream := g.in.stream()
		typ := g.in.hdr[3]
		if !g.spendEmpty(typ) {
			return g.goAway(errEnhanceYourCalm, errEmpty)
		}
		if g.hb.open != (typ == frameContinuation) {
			// A block interrupted, or a CONTINUATION outside one: the
			// server ends the connection too (RFC 9113 section 6.10).
			return g.goAway(errProtocol, errMalformed)
		}
		switch typ {
		case frameHeaders, frameContinuation:
			code := g.startFragment()
			if code == 0 {
				b, code = g.fragment(b)
			}
			if code != 0 {
				return g.goAway(code, errMalformed)
			}
		case frameRSTStream:
			if g.responded[stream>>1%respSlots].Load() != stream && !g.spendReset() {
				return g.goAway(errEnhanceYourCalm, errCalm)
			}
		case frameSettings:
			// Go's HTTP/2 server reads a frame's header and payload
			// apart; a payload cut anywhere else is left as it is.
			if g.in.hdr[4]&flagAck == 0 {
				if int64(len(b)) >= g.in.remain {
					dedupeSettings(b[:g.in.remain])
				} else {
					g.settingsNext = len(b) == 0
				}
			}
		}
	}
	return true
}

// spendEmpty counts the frame of type typ whose header was just read
// against the empty-frame budget (EmptyFrameBurst), as hostgate's engine
// does, and reports whether it was within it.
func (g *Conn) spendEmpty(typ byte) bool {
	empty, flags := g.in.remain == 0, g.in.hdr[4]
	headers := typ == frameHeaders || typ == frameContinuation
	switch {
	case typ == framePriority || empty && (typ == frameData && flags&flagEndStream == 0 || headers && flags&flagEndHeaders == 0):
		if g.empties == 0 {
			return false
		}
		g.empties--
	case typ == frameData || headers && flags&flagEndHeaders != 0:
		g.empties = min(EmptyFrameBurst, g.empties+1)
	}
	return true
}

// HTTP/2 frame types, flags and the error codes the guard uses (RFC 9113).
const (
	frameData          = 0x0
	frameHeaders       = 0x1
	framePriority      = 0x2
	frameRSTStream     = 0x3
	frameSettings      = 0x4
	frameGoAway        = 0x7
	frameContinuation  = 0x9
	flagAck            = 0x1
	flagEndStream      = 0x1
	flagEndHeaders     = 0x4
	flagPadded         = 0x8
	flagPriority       = 0x20
	errProtocol        = 0x1
	errCompression     = 0x9
	errEnhanceYourCalm = 0xb
)

// h2HeaderTableSize is the HPACK dynamic table size the HTTP/2 servers
// (net/http's and x/net's for h2c upgrades) advertise and decode with:
// both default to 4096, which the listeners do not change.
const h2HeaderTableSize = 4096

// headerBlock follows the header blocks a client sends, decoding them with
// an HPACK decoder in step with the server's: every HEADERS and
// CONTINUATION frame the server reads passes through it in order.
type headerBlock struct {
	dec     *hpack.Decoder
	open    bool   // a block began and has not ended
	inFrame bool   // in the payload of one of its frames
	stream  uint32 // the stream of the open block
	last    bool   // the current frame ends the block
	padLen  bool   // the pad length byte comes next
	skip    int64  // priority bytes to skip
	frag    int64  // block fragment bytes left in the frame
	tes     int    // TE fields in the block
	bad     bool   // a field makes the request malformed
}

// startFragment begins the payload of a HEADERS or CONTINUATION frame
// whose header was just read, and returns an HTTP/2 error code if the
// frame is malformed.
func (g *Conn) startFragment() uint32 {
	h := &g.hb
	flags := g.in.hdr[4]
	if h.dec == nil {
		h.dec = hpack.NewDecoder(h2HeaderTableSize, h.field)
	}
	h.padLen, h.skip = false, 0
	if g.in.hdr[3] == frameHeaders {
		h.open, h.stream, h.tes = true, g.in.stream(), 0
		h.padLen = flags&flagPadded != 0
		if flags&flagPriority != 0 {
			h.skip = 5
		}
	} else if g.in.stream() != h.stream {
		return errProtocol
	}
	h.frag = g.in.remain - h.skip
	if h.padLen {
		h.frag--
	}
	if h.frag < 0 {
		return errProtocol
	}
	h.inFrame, h.last = true, flags&flagEndHeaders != 0
	return 0
}

// fragment takes what b holds of the current header block frame's payload
// and returns the rest of b, and an HTTP/2 error code if the block is
// malformed, or cannot be decoded (which the server would find too).
func (g *Conn) fragment(b []byte) ([]byte, uint32) {
	h := &g.hb
	n := min(g.in.remain, int64(len(b)))
	p := b[:n]
	b = b[n:]
	g.in.remain -= n
	for len(p) > 0 {
		switch {
		case h.padLen:
			h.padLen = false
			h.frag -= int64(p[0])
			p = p[1:]
			if h.frag < 0 {
				return b, errProtocol
			}
		case h.skip > 0:
			k := min(h.skip, int64(len(p)))
			h.skip -= k
			p = p[k:]
		case h.frag > 0:
			k := min(h.frag, int64(len(p)))
			h.frag -= k
			if _, err := h.dec.Write(p[:k]); err != nil {
				return b, errCompression
			}
			if h.bad {
				return b, errProtocol
			}
			p = p[k:]
		default:
			// Padding.
			p = nil
		}
	}
	if g.in.remain > 0 {
		return b, 0
	}
	h.inFrame = false
	if h.last {
		h.open = false
		if h.dec.Close() != nil {
			return b, errCompression
		}
		if h.stream > g.lastStream.Load() {
			g.lastStream.Store(h.stream)
		}
	}
	return b, 0
}

// field notes a decoded field that makes a request malformed in HTTP/2
// (RFC 9113 section 8.2.2), as the server's checkValidHTTP2RequestHeaders
// sees it: a connection-specific field, or TE other than one "trailers".
// The server reads names in lower case only, or resets the stream.
func (h *headerBlock) field(f hpack.HeaderField) {
	switch f.Name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		h.bad = true
	case "te":
		h.tes++
		if h.tes > 1 || f.Value != "trailers" && f.Value != "" {
			h.bad = true
		}
	}
}

// dedupeSettings renames in place all but the last of repeated settings in
// a SETTINGS payload to distinct identifiers of the experimental range,
// which the server ignores (RFC 9113 sections 6.5.2, 11.3). RFC 9113
// section 6.5.3 has repeated settings processed in order, the last value
// winning, but Go's server refuses them as a connection error (h2spec
// 6.5.3/1). An earlier value that is invalid is left for the server to
// refuse. Only short frames are looked at, as real clients send: the cost
// is quadratic in the number of settings.
func dedupeSettings(p []byte) {
	const maxSettings = 16
	if len(p)%6 != 0 || len(p) > 6*maxSettings {
		return
	}
	for i := 0; i < len(p); i += 6 {
		id := binary.BigEndian.Uint16(p[i:])
		for j := i + 6; j < len(p); j += 6 {
			if binary.BigEndian.Uint16(p[j:]) == id {
				if validSetting(id, binary.BigEndian.Uint32(p[i+2:])) {
					binary.BigEndian.PutUint16(p[i:], 0xf000+uint16(i/6))
				}
				break
			}
		}
	}
}

// validSetting reports whether the server would take v for setting id
// (RFC 9113 section 6.5.2).
func validSetting(id uint16, v uint32) bool {
	switch id {
	case 0x2: // SETTINGS_ENABLE_PUSH
		return v <= 1
	case 0x4: // SETTINGS_INITIAL_WINDOW_SIZE
		return v <= 1<<31-1
	case 0x5: // SETTINGS_MAX_FRAME_SIZE
		return v >= 1<<14 && v <= 1<<24-1
	}
	return true
}

// spendReset takes one reset from the budget, refilled at ResetRate per
// second up to ResetBurst, and reports whether there was one.
func (g *Conn) spendReset() bool {
	now := g.now()
	g.resets = min(ResetBurst, g.resets+now.Sub(g.refilled).Seconds()*ResetRate)
	g.refilled = now
	if g.resets < 1 {
		return false
	}
	g.resets--
	return true
}

// goAway ends the HTTP/2 connection: it has GOAWAY with code written now,
// or by the Write in progress when it ends, and reads fail with err after
// it, as do writes. It returns false, for frames to return.
func (g *Conn) goAway(code uint32, err error) bool {
	g.st, g.h2err = stGoneAway, err
	g.awayCode.Store(code)
	g.away.Store(true)
	if g.writing.CompareAndSwap(0, 2) {
		g.writeGoAway()
	}
	return false
}

// goAwayLinger is how long the guard reads and drops what a client sends
// after its GOAWAY, as the HTTP/2 server does after its own.
const goAwayLinger = time.Second

// drain reads and drops what the client sends after the guard's GOAWAY,
// until the client closes or goAwayLinger passes, and then fails: closing
// a socket with unread bytes sends a TCP reset, which can destroy the
// GOAWAY before the client reads it.
func (g *Conn) drain(p []byte) (int, error) {
	_ = g.Conn.SetReadDeadline(g.now().Add(goAwayLinger))
	for {
		if _, err := g.Conn.Read(p); err != nil {
			return 0, g.h2err
		}
	}
}

func (g *Conn) writeGoAway() {
	var f [17]byte
	f[2] = 8
	f[3] = frameGoAway
	binary.BigEndian.PutUint32(f[9:], g.lastStream.Load())
	binary.BigEndian.PutUint32(f[13:], g.awayCode.Load())
	// A client that does not read must not hold the reader here.
	_ = g.Conn.SetWriteDeadline(g.now().Add(time.Second))
	_, _ = g.Conn.Write(f[:])
}

// Write bounds each write by writes: a client that stops reading an
// answer (its receive window full) no longer holds the connection, and
// the backend connection relaying to it, for as long as it likes. HTTP/2
// has its own bound per write (WriteByteTimeout), which this repeats.
func (g *Conn) Write(p []byte) (int, error) {
	if d, ok := g.writes.Next(); ok {
		_ = g.Conn.SetWriteDeadline(d)
	}
	switch g.wr.Load() {
	case wrUpgrade:
		g.answer(p)
	case wrFrames:
		return g.writeFrames(p)
	case wrClosed:
		return 0, net.ErrClosed
	}
	return g.Conn.Write(p)
}

// LeaveFrames stops the guard's HTTP/2 inspection of a connection that
// hostgate's own engine (proxy/h2) serves: it enforces the same limits
// (the reset budget, header blocks past the limit, connection-specific
// fields) as it reads, so the frames are read, and header blocks decoded,
// once rather than twice. The reader of the connection calls it, or,
// after an h2c upgrade, the goroutine that will read it next, before any
// frame is read. A connection the guard already ended stays ended.
func (g *Conn) LeaveFrames() {
	if g.st == stPreface || g.st == stFrames {
		g.st = stPassthrough
	}
	if g.wr.CompareAndSwap(wrFrames, wrOther) {
		// Nothing writes frames through the guard yet.
		g.responded = nil
	}
}

// answer looks at the head of the answer to an Upgrade request, which
// net/http, httputil.ReverseProxy and the h2c upgrade write whole: 101
// switches to HTTP/2 if it names h2c (serveH2CUpgrade's head) and to an
// uninspected protocol otherwise, another 1xx leaves the question open,
// anything else declines. The reader learns of it before the client can.
//
// The answer is taken to be that of the Upgrade request, so an Upgrade
// pipelined behind another request fails (closed): the earlier response
// ends the upgrade and the new protocol's bytes are refused as HTTP/1.1.
func (g *Conn) answer(p []byte) {
	if len(p) < 12 || string(p[:7]) != "HTTP/1." || p[8] != ' ' || p[9] != '1' {
		g.wr.Store(wrHTTP1)
		return
	}
	if string(p[9:12]) != "101" {
		return
	}
	if bytes.Contains(p, []byte("\r\nUpgrade: h2c\r\n")) {
		g.responded = new([respSlots]atomic.Uint32)
		g.wr.Store(wrFrames)
		return
	}
	g.wr.Store(wrOther)
}

// writeFrames notes the streams whose response starts in p before writing
// it, so that a reset the client sends after seeing it is not counted.
// After the guard's GOAWAY it drops what the server writes: a failed write
// would have the server close the socket at once, with the client's unread
// bytes in it, and the TCP reset that sends can destroy the GOAWAY.
//
// It yields before writing. The HTTP/2 server writes one batch of frames
// at a time and flushes whenever its queue is empty; on a busy core its
// handlers queue the frames of their responses only once they run, so
// batches stayed small: about two writes per response. Letting them run
// first gathers their frames into the next batch, and a system call and a
// TLS record carry many responses (bench/run.sh h2-tls: 1.3× the
// requests/s, p99 down by a quarter).
func (g *Conn) writeFrames(p []byte) (int, error) {
	runtime.Gosched()
	if !g.writing.CompareAndSwap(0, 1) {
		return len(p), nil
	}
	for b, ok := g.out.next(p); ok; b, ok = g.out.next(b) {
		if g.out.hdr[3] == frameHeaders {
			stream := g.out.stream()
			g.responded[stream>>1%respSlots].Store(stream)
		}
	}
	n, err := g.Conn.Write(p)
	g.writing.Store(0)
	if g.away.Load() && g.writing.CompareAndSwap(0, 2) {
		g.writeGoAway()
	}
	return n, err
}

// frameScanner finds the HTTP/2 frame headers in a stream of bytes that
// comes in pieces.
type frameScanner struct {
	hdr    [9]byte
	n      int   // bytes of hdr filled
	remain int64 // payload bytes of the current frame left
}

// next skips b to the end of the next frame header and returns the rest
// of b, and false if b ended first.
func (s *frameScanner) next(b []byte) ([]byte, bool) {
	for len(b) > 0 {
		if s.remain > 0 {
			n := min(s.remain, int64(len(b)))
			s.remain -= n
			b = b[n:]
			continue
		}
		n := copy(s.hdr[s.n:], b)
		s.n += n
		b = b[n:]
		if s.n == len(s.hdr) {
			s.n = 0
			s.remain = int64(s.hdr[0])<<16 | int64(s.hdr[1])<<8 | int64(s.hdr[2])
			return b, true
		}
	}
	return b, false
}

func (s *frameScanner) stream() uint32 {
	return binary.BigEndian.Uint32(s.hdr[5:]) & 0x7fffffff
}

// Listener guards the connections it accepts, after terminating TLS
// if tls is set.
type Listener struct {
	net.Listener
	TLS *tls.Config
	// writeStall is each connection's write bound (Conn.Write).
	WriteStall time.Duration
}

func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.Guard(c), nil
}

// guard wraps c, accepted from l.Listener, as Accept does.
func (l Listener) Guard(c net.Conn) *Conn {
	if l.TLS != nil {
		c = tls.Server(c, l.TLS)
	}
	g := newGuardConn(c)
	g.writes.Stall = l.WriteStall
	if b, ok := c.(*BufferedConn); ok {
		g.served = b.Served
	}
	return g
}

// WriteBound keeps a write deadline at least half of stall ahead of every
// write, for a peer that stops reading: the deadline moves only once half
// of it has passed, so a connection or stream that keeps writing changes
// its timer about once per half stall, not per write.
type WriteBound struct {
	// stall is how long one write may wait; 0 leaves writes unbounded.
	Stall time.Duration
	// armed is when the deadline last moved, by whichever goroutine
	// writes (one at a time).
	armed time.Time
}

// next returns the deadline to set before a write, and false when the one
// set is still far enough ahead.
func (b *WriteBound) Next() (time.Time, bool) {
	if b.Stall <= 0 {
		return time.Time{}, false
	}
	now := time.Now()
	if now.Sub(b.armed) < b.Stall/2 {
		return time.Time{}, false
	}
	b.armed = now
	return now.Add(b.Stall), true
}
