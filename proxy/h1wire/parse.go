package h1wire

// Request and response heads.
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

	"github.com/hostgate/hostgate/proxy/guard"
)

// Field is one header field. Hop marks a hop-by-hop field, which is not
// forwarded.
type Field struct {
	Name, Value string
	Hop         bool
}

// Fields is an ordered header list that header modifiers can edit as
// they edit an http.Header; names compare case-insensitively.
type Fields []Field

func (h *Fields) Set(name, value string) {
	h.Del(name)
	h.Add(name, value)
}

func (h *Fields) Add(name, value string) {
	*h = append(*h, Field{Name: textproto.CanonicalMIMEHeaderKey(name), Value: value})
}

func (h *Fields) Del(name string) {
	out := (*h)[:0]
	for _, f := range *h {
		if !equalName(f.Name, name) {
			out = append(out, f)
		}
	}
	clear((*h)[len(out):])
	*h = out
}

// Has reports whether a forwarded field is named name.
func (h Fields) Has(name string) bool {
	for i := range h {
		if !h[i].Hop && equalName(h[i].Name, name) {
			return true
		}
	}
	return false
}

// Head is a parsed head, request or response.
type Head struct {
	raw    string
	Fields Fields
	// vals[i] is fields[i].value as a slice of one, for Values.
	vals   []string
	HTTP10 bool
	// contentLength is -1 when the head has none.
	ContentLength int64
	Chunked       bool
	// Connection options.
	Close, KeepAlive bool
	// teTrailers says the client accepts trailers (TE: trailers), which is
	// all of TE that goes on.
	TETrailers bool

	// Request only.
	Method, Path, Query, Host string
	// hosts counts the Host fields.
	hosts              int
	Upgrade, Expect100 bool

	// Response only.
	Status int
}

// Values gives the values of a request field, for router.Headers; name is
// canonical, as the parsed names are.
func (h *Head) Values(name string) []string {
	first := -1
	for i := range h.Fields {
		if h.Fields[i].Name != name {
			continue
		}
		if first >= 0 {
			// Repeated: rare enough to allocate.
			var all []string
			for j := first; j < len(h.Fields); j++ {
				if h.Fields[j].Name == name {
					all = append(all, h.Fields[j].Value)
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

// Get is the first value of a field, "" when absent.
func (h *Head) Get(name string) string {
	for i := range h.Fields {
		if equalName(h.Fields[i].Name, name) {
			return h.Fields[i].Value
		}
	}
	return ""
}

func (h *Head) Reset(raw string) {
	clear(h.Fields)
	clear(h.vals)
	*h = Head{raw: raw, Fields: h.Fields[:0], vals: h.vals[:0], ContentLength: -1}
}

// HeadEnd returns the length of the head at the start of b, through the
// empty line that ends it, or -1 when b holds no whole head. The search
// starts at from, where the previous call stopped. A bare LF ends lines as
// well as CRLF; the parsers tell which they accept.
func HeadEnd(b []byte, from int) int {
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

// HeadSearchFrom is where headEnd resumes on b after finding no head in
// its first n bytes.
func HeadSearchFrom(n int) int { return max(0, n-2) }

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

// ParseRequest parses a request head into h, reporting false for anything
// the engine leaves to net/http.
func ParseRequest(raw string, h *Head) bool {
	h.Reset(raw)
	line, rest, ok := nextLine(raw, true)
	if !ok {
		return false
	}
	method, line, ok := strings.Cut(line, " ")
	if !ok || !IsToken(method) {
		return false
	}
	target, version, ok := strings.Cut(line, " ")
	if !ok {
		return false
	}
	switch version {
	case "HTTP/1.1":
	case "HTTP/1.0":
		h.HTTP10 = true
	default:
		return false
	}
	h.Method = method
	h.Path, h.Query, _ = strings.Cut(target, "?")
	if !ValidPath(h.Path) || !ValidQuery(h.Query) {
		return false
	}
	if !parseFields(rest, h, true, checkRequestField) {
		return false
	}
	switch {
	case h.hosts > 1 || h.hosts == 0 && !h.HTTP10:
		return false
	case h.Chunked && (h.ContentLength >= 0 || h.HTTP10):
		return false
	}
	return true
}

// ParseResponse parses a response head into h, reporting false for one
// that cannot be relayed.
func ParseResponse(raw string, h *Head) bool {
	h.Reset(raw)
	line, rest, ok := nextLine(raw, false)
	if !ok || len(line) < len("HTTP/1.1 200") || (len(line) > 12 && line[12] != ' ') {
		return false
	}
	switch line[:9] {
	case "HTTP/1.1 ":
	case "HTTP/1.0 ":
		h.HTTP10 = true
	default:
		return false
	}
	code, err := strconv.Atoi(line[9:12])
	if err != nil || code < 100 {
		return false
	}
	h.Status = code
	// An HTTP/1.0 message with Transfer-Encoding has faulty framing (RFC
	// 9112 section 6.1): where its body ends is anyone's guess, and
	// net/http's clients read it to the close, not chunked.
	return parseFields(rest, h, false, nil) && !(h.Chunked && h.HTTP10)
}

// checkRequestField notes the request fields the engine acts on, and
// refuses those it leaves to net/http.
func checkRequestField(h *Head, f *Field) bool {
	switch f.Name {
	case "Host":
		h.hosts++
		h.Host = f.Value
		f.Hop = true // written first, maybe rewritten
		return ValidHost(f.Value)
	case "Upgrade":
		h.Upgrade = true
	case "Expect":
		// Other expectations get net/http's 417.
		h.Expect100 = true
		return strings.EqualFold(f.Value, "100-continue")
	case "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Real-Ip", "X-Request-Id", "X-Forwarded-Client-Cert":
		f.Hop = true // replaced by the proxy's
	case "Forwarded":
		f.Hop = true // dropped, as ReverseProxy drops it
	}
	return true
}

// parseFields parses the field lines of a head, noting framing and
// connection options in h and marking hop-by-hop fields; each field also
// goes through check, if set, which may refuse it. Request field names are
// canonicalized, for the router; response names are relayed as they came.
func parseFields(s string, h *Head, request bool, check func(*Head, *Field) bool) bool {
	// connection holds the Connection fields, on the stack for the one or
	// two a head has.
	var connBuf [2]string
	connection := connBuf[:0]
	var lengthText string
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
		if !ok || !IsToken(name) {
			return false
		}
		value = trimOWS(value)
		if !ValidValue(value) {
			return false
		}
		if request {
			name = textproto.CanonicalMIMEHeaderKey(name)
		}
		h.Fields = append(h.Fields, Field{Name: name, Value: value})
		f := &h.Fields[len(h.Fields)-1]
		switch {
		case equalName(name, "Content-Length"):
			n, ok := parseLength(value)
			// A repeat of the same text is taken in a response, as
			// net/http takes it ("03" after "3" is not, though the same
			// number); in a request it is declined, as the guard refuses
			// it (the smuggling set), so that an engine without the guard
			// in front (proxy/h1loop) hands it to one with.
			if !ok || h.ContentLength >= 0 && (request || value != lengthText) {
				return false
			}
			h.ContentLength, lengthText = n, value
			f.Hop = true // written by the engine from its framing
		case equalName(name, "Transfer-Encoding"):
			if h.Chunked || !strings.EqualFold(value, "chunked") {
				return false
			}
			h.Chunked = true
			f.Hop = true
		case equalName(name, "Connection"):
			connection = append(connection, value)
			f.Hop = true
		case equalName(name, "Te"):
			h.TETrailers = h.TETrailers || HasToken([]string{value}, "trailers")
			f.Hop = true
		case IsHopByHop(name):
			f.Hop = true
		}
		if check != nil && !check(h, f) {
			return false
		}
		h.vals = append(h.vals, f.Value)
	}
	if s != "" {
		return false // bytes after the head: not what was read
	}
	for _, v := range connection {
		for opt := range strings.SplitSeq(v, ",") {
			opt = strings.TrimSpace(opt)
			switch {
			case strings.EqualFold(opt, "close"):
				h.Close = true
			case strings.EqualFold(opt, "keep-alive"):
				h.KeepAlive = true
			}
			// The fields a Connection names are hop-by-hop too (RFC
			// 9110 section 7.6.1).
			for i := range h.Fields {
				if equalName(h.Fields[i].Name, opt) {
					h.Fields[i].Hop = true
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

// BodyMode is how the body of a response to a request of method ends.
func (h *Head) BodyMode(method string) BodyMode {
	switch {
	case method == http.MethodHead || h.Status == http.StatusNoContent || h.Status == http.StatusNotModified:
		return BodyNone
	case h.Chunked:
		return BodyChunked
	case h.ContentLength >= 0:
		return BodyLength
	}
	return BodyUntilClose
}

// Reusable reports whether the connection of a response whose body ends
// as mode says can serve another request, once the body is read and the
// request was sent whole.
func (h *Head) Reusable(mode BodyMode) bool {
	return mode != BodyUntilClose && !h.Close && (!h.HTTP10 || h.KeepAlive)
}

// IsHopByHop reports the hop-by-hop fields httputil.ReverseProxy removes,
// besides those parseFields handles itself.
func IsHopByHop(name string) bool {
	for _, h := range [...]string{"Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Trailer", "Upgrade"} {
		if equalName(name, h) {
			return true
		}
	}
	return false
}

// equalName reports whether field names a and b are the same, case
// aside. Names of other lengths, most of those compared, are told apart
// before strings.EqualFold, a call not inlined: a head's fields meet a
// dozen such comparisons each.
func equalName(a, b string) bool {
	return len(a) == len(b) && strings.EqualFold(a, b)
}

// trimOWS drops the spaces and tabs around a field value (RFC 9112
// section 5.1), without the set strings.Trim builds on every call.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !guard.IsTokenByte(s[i]) {
			return false
		}
	}
	return true
}

// ValidValue refuses control characters other than HTAB in a field value.
func ValidValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// ValidHost takes the characters of a host and port, IPv6 literals
// included; net/http judges anything else.
func ValidHost(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._:[]", c) >= 0) {
			return false
		}
	}
	return true
}

// ValidPath reports whether p is an absolute path that url.URL.EscapedPath
// would give back unchanged: unreserved and sub-delimiter characters, ":",
// "@", "/" and valid percent-escapes. The router and the backend then see
// what net/http would have shown them.
func ValidPath(p string) bool {
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
			if _, ok := guard.HexDigit(p[i+1]); !ok {
				return false
			}
			if _, ok := guard.HexDigit(p[i+2]); !ok {
				return false
			}
			i += 2
		default:
			return false
		}
	}
	return true
}

// ValidQuery takes visible ASCII but "#", which net/http would read
// differently.
func ValidQuery(q string) bool {
	for i := 0; i < len(q); i++ {
		if c := q[i]; c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}

// HasToken reports whether a comma-separated header holds token.
func HasToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
