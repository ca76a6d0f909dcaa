package proxy

// Parsing for the HTTP/1.1 engine (h1.go): request and response heads.
//
// The parser takes only what it fully understands: an origin-form target
// whose path net/http would leave as it is, HTTP/1.0 or 1.1, one Host, one
// framing. Anything else makes it decline, and the engine hands the
// connection to net/http, which answers exactly as it did before the engine
// existed (400, 431, 505, an Upgrade, ...). It parses a head that was read
// whole, converted to one string, so that the names and values are
// substrings of it and cost no further allocation.

import (
	"bytes"
	"math"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// h1field is one header field. hop marks a hop-by-hop field, which is not
// forwarded.
type h1field struct {
	name, value string
	hop         bool
}

// h1fields is an ordered header list that header modifiers can edit as
// they edit an http.Header; names compare case-insensitively.
type h1fields []h1field

func (h *h1fields) Set(name, value string) {
	h.Del(name)
	h.Add(name, value)
}

func (h *h1fields) Add(name, value string) {
	*h = append(*h, h1field{name: textproto.CanonicalMIMEHeaderKey(name), value: value})
}

func (h *h1fields) Del(name string) {
	out := (*h)[:0]
	for _, f := range *h {
		if !strings.EqualFold(f.name, name) {
			out = append(out, f)
		}
	}
	clear((*h)[len(out):])
	*h = out
}

// has reports whether a forwarded field is named name.
func (h h1fields) has(name string) bool {
	for i := range h {
		if !h[i].hop && strings.EqualFold(h[i].name, name) {
			return true
		}
	}
	return false
}

// h1head is a parsed head, request or response.
type h1head struct {
	raw    string
	fields h1fields
	// vals[i] is fields[i].value as a slice of one, for Values.
	vals   []string
	http10 bool
	// contentLength is -1 when the head has none.
	contentLength int64
	chunked       bool
	// Connection options.
	close, keepAlive bool
	// teTrailers says the client accepts trailers (TE: trailers), which is
	// all of TE that goes on.
	teTrailers bool

	// Request only.
	method, path, query, host string
	// hosts counts the Host fields.
	hosts              int
	upgrade, expect100 bool

	// Response only.
	status int
}

// Values gives the values of a request field, for router.Headers; name is
// canonical, as the parsed names are.
func (h *h1head) Values(name string) []string {
	first := -1
	for i := range h.fields {
		if h.fields[i].name != name {
			continue
		}
		if first >= 0 {
			// Repeated: rare enough to allocate.
			var all []string
			for j := first; j < len(h.fields); j++ {
				if h.fields[j].name == name {
					all = append(all, h.fields[j].value)
				}
			}
			return all
		}
		first = i
	}
	if first < 0 {
		return nil
	}
	return h.vals[first : first+1 : first+1]
}

// get is the first value of a field, "" when absent.
func (h *h1head) get(name string) string {
	for i := range h.fields {
		if strings.EqualFold(h.fields[i].name, name) {
			return h.fields[i].value
		}
	}
	return ""
}

func (h *h1head) reset(raw string) {
	clear(h.fields)
	clear(h.vals)
	*h = h1head{raw: raw, fields: h.fields[:0], vals: h.vals[:0], contentLength: -1}
}

// headEnd returns the length of the head at the start of b, through the
// empty line that ends it, or -1 when b holds no whole head. The search
// starts at from, where the previous call stopped. A bare LF ends lines as
// well as CRLF; the parsers tell which they accept.
func headEnd(b []byte, from int) int {
	for i := from; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		switch {
		case i < len(b) && b[i] == '\n':
			return i + 1
		case i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n':
			return i + 2
		case i >= len(b):
			return -1
		}
	}
}

// headSearchFrom is where headEnd resumes on b after finding no head in
// its first n bytes.
func headSearchFrom(n int) int { return max(0, n-2) }

// nextLine splits s at its first line end; strict refuses a bare LF.
func nextLine(s string, strict bool) (line, rest string, ok bool) {
	i := strings.IndexByte(s, '\n')
	if i < 0 {
		return "", "", false
	}
	line, rest = s[:i], s[i+1:]
	if strings.HasSuffix(line, "\r") {
		line = line[:len(line)-1]
	} else if strict {
		return "", "", false
	}
	return line, rest, true
}

// parseRequest parses a request head into h, reporting false for anything
// the engine leaves to net/http.
func parseRequest(raw string, h *h1head) bool {
	h.reset(raw)
	line, rest, ok := nextLine(raw, true)
	if !ok {
		return false
	}
	method, line, ok := strings.Cut(line, " ")
	if !ok || !isToken(method) {
		return false
	}
	target, version, ok := strings.Cut(line, " ")
	if !ok {
		return false
	}
	switch version {
	case "HTTP/1.1":
	case "HTTP/1.0":
		h.http10 = true
	default:
		return false
	}
	h.method = method
	h.path, h.query, _ = strings.Cut(target, "?")
	if !validPath(h.path) || !validQuery(h.query) {
		return false
	}
	if !parseFields(rest, h, true, checkRequestField) {
		return false
	}
	switch {
	case h.hosts > 1 || h.hosts == 0 && !h.http10:
		return false
	case h.chunked && (h.contentLength >= 0 || h.http10):
		return false
	}
	return true
}

// parseResponse parses a response head into h, reporting false for one
// that cannot be relayed.
func parseResponse(raw string, h *h1head) bool {
	h.reset(raw)
	line, rest, ok := nextLine(raw, false)
	if !ok || len(line) < len("HTTP/1.1 200") || (len(line) > 12 && line[12] != ' ') {
		return false
	}
	switch line[:9] {
	case "HTTP/1.1 ":
	case "HTTP/1.0 ":
		h.http10 = true
	default:
		return false
	}
	code, err := strconv.Atoi(line[9:12])
	if err != nil || code < 100 {
		return false
	}
	h.status = code
	return parseFields(rest, h, false, nil)
}

// checkRequestField notes the request fields the engine acts on, and
// refuses those it leaves to net/http.
func checkRequestField(h *h1head, f *h1field) bool {
	switch f.name {
	case "Host":
		h.hosts++
		h.host = f.value
		f.hop = true // written first, maybe rewritten
		return validHost(f.value)
	case "Upgrade":
		h.upgrade = true
	case "Expect":
		// Other expectations get net/http's 417.
		h.expect100 = true
		return strings.EqualFold(f.value, "100-continue")
	case "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Real-Ip", "X-Request-Id", clientCertField:
		f.hop = true // replaced by the proxy's
	case "Forwarded":
		f.hop = true // dropped, as ReverseProxy drops it
	}
	return true
}

// parseFields parses the field lines of a head, noting framing and
// connection options in h and marking hop-by-hop fields; each field also
// goes through check, if set, which may refuse it. Request field names are
// canonicalized, for the router; response names are relayed as they came.
func parseFields(s string, h *h1head, request bool, check func(*h1head, *h1field) bool) bool {
	var connection []string
	for {
		line, rest, ok := nextLine(s, request)
		if !ok {
			return false
		}
		s = rest
		if line == "" {
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || !isToken(name) {
			return false
		}
		value = strings.Trim(value, " \t")
		if !validValue(value) {
			return false
		}
		if request {
			name = textproto.CanonicalMIMEHeaderKey(name)
		}
		h.fields = append(h.fields, h1field{name: name, value: value})
		f := &h.fields[len(h.fields)-1]
		switch {
		case strings.EqualFold(name, "Content-Length"):
			n, ok := parseLength(value)
			// A repeat with the same value is taken, as net/http does.
			if !ok || (h.contentLength >= 0 && h.contentLength != n) {
				return false
			}
			h.contentLength = n
			f.hop = true // written by the engine from its framing
		case strings.EqualFold(name, "Transfer-Encoding"):
			if h.chunked || !strings.EqualFold(value, "chunked") {
				return false
			}
			h.chunked = true
			f.hop = true
		case strings.EqualFold(name, "Connection"):
			connection = append(connection, value)
			f.hop = true
		case strings.EqualFold(name, "Te"):
			h.teTrailers = h.teTrailers || hasToken([]string{value}, "trailers")
			f.hop = true
		case isHopByHop(name):
			f.hop = true
		}
		if check != nil && !check(h, f) {
			return false
		}
		h.vals = append(h.vals, f.value)
	}
	if s != "" {
		return false // bytes after the head: not what was read
	}
	for _, v := range connection {
		for opt := range strings.SplitSeq(v, ",") {
			opt = strings.TrimSpace(opt)
			switch {
			case strings.EqualFold(opt, "close"):
				h.close = true
			case strings.EqualFold(opt, "keep-alive"):
				h.keepAlive = true
			}
			// The fields a Connection names are hop-by-hop too (RFC
			// 9110 section 7.6.1).
			for i := range h.fields {
				if strings.EqualFold(h.fields[i].name, opt) {
					h.fields[i].hop = true
				}
			}
		}
	}
	return true
}

// parseLength parses a Content-Length value: decimal digits only, as
// strconv.ParseInt with the sign refused did. It replaced ParseInt when
// ParseInt's frames were the deepest of a request bridged from HTTP/2 and
// grew its goroutine's stack; reserveStack (listener.go) now grows that
// stack once, early, whatever the deepest call, so the loop stays for
// being as simple as the check it replaced, not for its depth.
func parseLength(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' || n > (math.MaxInt64-int64(c-'0'))/10 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// bodyMode is how the body of a response to a request of method ends.
func (h *h1head) bodyMode(method string) bodyMode {
	switch {
	case method == http.MethodHead || h.status == http.StatusNoContent || h.status == http.StatusNotModified:
		return bodyNone
	case h.chunked:
		return bodyChunked
	case h.contentLength >= 0:
		return bodyLength
	}
	return bodyUntilClose
}

// reusable reports whether the connection of a response whose body ends
// as mode says can serve another request, once the body is read and the
// request was sent whole.
func (h *h1head) reusable(mode bodyMode) bool {
	return mode != bodyUntilClose && !h.close && (!h.http10 || h.keepAlive)
}

// isHopByHop reports the hop-by-hop fields httputil.ReverseProxy removes,
// besides those parseFields handles itself.
func isHopByHop(name string) bool {
	for _, h := range [...]string{"Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Trailer", "Upgrade"} {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenByte(s[i]) {
			return false
		}
	}
	return true
}

// validValue refuses control characters other than HTAB in a field value.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// validHost takes the characters of a host and port, IPv6 literals
// included; net/http judges anything else.
func validHost(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._:[]", c) >= 0) {
			return false
		}
	}
	return true
}

// validPath reports whether p is an absolute path that url.URL.EscapedPath
// would give back unchanged: unreserved and sub-delimiter characters, ":",
// "@", "/" and valid percent-escapes. The router and the backend then see
// what net/http would have shown them.
func validPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-._~!$&'()*+,;=:@/", c) >= 0:
		case c == '%':
			if i+2 >= len(p) {
				return false
			}
			if _, ok := hexDigit(p[i+1]); !ok {
				return false
			}
			if _, ok := hexDigit(p[i+2]); !ok {
				return false
			}
			i += 2
		default:
			return false
		}
	}
	return true
}

// validQuery takes visible ASCII but "#", which net/http would read
// differently.
func validQuery(q string) bool {
	for i := 0; i < len(q); i++ {
		if c := q[i]; c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}
