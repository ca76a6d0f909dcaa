package h1wire

// The parts of a response head that every engine writes the same way, as
// net/http does: the HTTP/1.1 engine's answers and relayed responses, and
// the readiness loop's.

import (
	"bufio"
	"net/http"
	"strconv"
	"time"
)

// WriteStatusLine writes a status line in the client's version (http10:
// HTTP/1.0).
func WriteStatusLine(bw *bufio.Writer, http10 bool, code int) {
	if http10 {
		bw.WriteString("HTTP/1.0 ")
	} else {
		bw.WriteString("HTTP/1.1 ")
	}
	// Digits appended to the writer's own free space cost no allocation.
	bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(code), 10))
	bw.WriteByte(' ')
	if text := http.StatusText(code); text != "" {
		bw.WriteString(text)
	} else {
		bw.WriteString("status code ")
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(code), 10))
	}
	bw.WriteString("\r\n")
}

// WriteFields writes the fields that are not hop-by-hop; keepTrailer
// keeps Trailer, which announces the trailers of a chunked response
// relayed as such.
func WriteFields(bw *bufio.Writer, fields Fields, keepTrailer bool) {
	for i := range fields {
		f := &fields[i]
		if f.Hop && !(keepTrailer && equalName(f.Name, "Trailer")) {
			continue
		}
		bw.WriteString(f.Name)
		bw.WriteString(": ")
		bw.WriteString(f.Value)
		bw.WriteString("\r\n")
	}
}

// WriteContentLength writes a Content-Length field.
func WriteContentLength(bw *bufio.Writer, n int64) {
	bw.WriteString("Content-Length: ")
	bw.Write(strconv.AppendInt(bw.AvailableBuffer(), n, 10))
	bw.WriteString("\r\n")
}

// WriteErrorFields writes the fields of an answer whose plain-text body
// is n bytes long, as net/http's http.Error: with challenge, when not
// empty, as its WWW-Authenticate field, and server, when not empty, as
// its Server field.
func WriteErrorFields(bw *bufio.Writer, n int, challenge, server string) {
	bw.WriteString("Content-Type: text/plain; charset=utf-8\r\n")
	WriteContentLength(bw, int64(n))
	bw.WriteString("X-Content-Type-Options: nosniff\r\n")
	if challenge != "" {
		bw.WriteString("WWW-Authenticate: " + challenge + "\r\n")
	}
	if server != "" {
		bw.WriteString("Server: " + server + "\r\n")
	}
}

// EndHead writes the fields every answer carries and ends the head: an
// Alt-Svc field per altSvc, Date at now unless the zero time says the head
// has one, and the Connection field a client of its version needs to
// know whether the connection stays open (keep).
func EndHead(bw *bufio.Writer, altSvc []string, now time.Time, http10, keep bool) {
	for _, v := range altSvc {
		bw.WriteString("Alt-Svc: ")
		bw.WriteString(v)
		bw.WriteString("\r\n")
	}
	if !now.IsZero() {
		bw.WriteString("Date: ")
		bw.Write(now.UTC().AppendFormat(bw.AvailableBuffer(), http.TimeFormat))
		bw.WriteString("\r\n")
	}
	switch {
	case !keep && !http10:
		bw.WriteString("Connection: close\r\n")
	case keep && http10:
		bw.WriteString("Connection: keep-alive\r\n")
	}
	bw.WriteString("\r\n")
}

// WriteRequestFields writes a request's fields to a backend, leaving out
// the hop-by-hop ones and those the framing owns, which a modifier may
// have set, as net/http's Transport ignores them.
func WriteRequestFields(bw *bufio.Writer, fields Fields) {
	for i := range fields {
		f := &fields[i]
		if f.Hop || equalName(f.Name, "Host") || equalName(f.Name, "Content-Length") || equalName(f.Name, "Transfer-Encoding") || equalName(f.Name, "Trailer") {
			continue
		}
		bw.WriteString(f.Name)
		bw.WriteString(": ")
		bw.WriteString(f.Value)
		bw.WriteString("\r\n")
	}
}
