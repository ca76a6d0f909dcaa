package h2

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// queueHeaders queues a header section as HEADERS and CONTINUATION
// frames: a response's with its :status and a Date when it has none, and
// a Content-Length of length unless it is negative, or, with status 0, a
// trailer. c.mu is held.
func (c *conn) queueHeaders(id uint32, status int, h http.Header, length int64, end bool) {
	e := &c.enc
	e.start()
	if status != 0 {
		e.keyed(&e.status, statusText(status), false)
		if _, ok := h["Date"]; !ok && status >= 200 {
			e.keyed(&e.date, httpDate(), false)
		}
	}
	if length >= 0 {
		e.keyed(&e.length, lengthText(length), false)
	}
	if status != 0 {
		e.header(h, isTrailerKey)
	} else {
		e.header(h, noKey)
	}
	c.writeBlock(id, end)
}

// isTrailerKey names the trailer fields a handler sets in the header with
// http.TrailerPrefix, which go out after the body.
func isTrailerKey(k string) bool { return strings.HasPrefix(k, http.TrailerPrefix) }

func noKey(string) bool { return false }

// commonLower maps canonical keys to their HTTP/2 names, "" for those
// HTTP/2 does not carry.
var commonLower = func() map[string]string {
	m := map[string]string{
		"Connection": "", "Keep-Alive": "", "Proxy-Connection": "", "Transfer-Encoding": "", "Upgrade": "",
	}
	for _, k := range []string{
		"Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language", "Accept-Ranges", "Access-Control-Allow-Credentials",
		"Access-Control-Allow-Headers", "Access-Control-Allow-Methods", "Access-Control-Allow-Origin", "Access-Control-Expose-Headers",
		"Access-Control-Max-Age", "Age", "Allow", "Alt-Svc", "Authorization", "Cache-Control", "Content-Disposition", "Content-Encoding",
		"Content-Language", "Content-Length", "Content-Location", "Content-Range", "Content-Type", "Cookie", "Date", "Etag", "Expect",
		"Expires", "From", "Grpc-Encoding", "Grpc-Message", "Grpc-Status", "Host", "If-Match", "If-Modified-Since", "If-None-Match",
		"If-Range", "If-Unmodified-Since", "Last-Modified", "Link", "Location", "Max-Forwards", "Origin", "Proxy-Authenticate",
		"Proxy-Authorization", "Range", "Referer", "Refresh", "Retry-After", "Server", "Set-Cookie", "Strict-Transport-Security",
		"Te", "Trailer", "User-Agent", "Vary", "Via", "Www-Authenticate", "X-Content-Type-Options", "X-Forwarded-For",
		"X-Forwarded-Proto", "X-Request-Id",
	} {
		m[k] = strings.ToLower(k)
	}
	return m
}()

// statusTexts are the :status values of 100 to 599, made once.
var statusTexts = func() (s [600]string) {
	for i := 100; i < len(s); i++ {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

// lengthTexts are the Content-Length values of small bodies, made once.
var lengthTexts = func() (s [1024]string) {
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func lengthText(n int64) string {
	if n < int64(len(lengthTexts)) {
		return lengthTexts[n]
	}
	return strconv.FormatInt(n, 10)
}

// statusLines are http.Response's Status of the codes 100 to 599, made
// once.
var statusLines = func() (s [600]string) {
	for i := 100; i < len(s); i++ {
		s[i] = strconv.Itoa(i) + " " + http.StatusText(i)
	}
	return s
}()

func statusLine(code int) string {
	if code < len(statusLines) {
		return statusLines[code]
	}
	return strconv.Itoa(code)
}

func statusText(code int) string {
	if code < len(statusTexts) {
		return statusTexts[code]
	}
	return strconv.Itoa(code)
}

// dateCache is the Date of the current second, formatted once a second
// rather than once a response.
var dateCache atomic.Pointer[struct {
	unix int64
	text string
}]

func httpDate() string {
	now := time.Now()
	if d := dateCache.Load(); d != nil && d.unix == now.Unix() {
		return d.text
	}
	d := &struct {
		unix int64
		text string
	}{now.Unix(), now.UTC().Format(http.TimeFormat)}
	dateCache.Store(d)
	return d.text
}
