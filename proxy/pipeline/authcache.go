package pipeline

// The cache of an ExternalAuth filter's answers (router.AuthCache,
// ingress-nginx's auth-cache-key): an answer the filter's TTLs keep is
// reused for requests with the same key until it expires, so that the
// authorization service is not asked again.
//
// Like the rate limits' counts, a cache outlives a configuration swap:
// guardRegistry owns it, keyed by the filter's cache ID, and a table that
// keeps the ID keeps the answers. Entries are keyed by the SHA-256 of the
// request's host and key values, so that no crafted value can stand for
// another (a 64-bit hash could be made to collide with a cached allow).
// Each cache holds at most maxAuthCacheEntries answers; a new one past
// that replaces one at random, as a bounded table must.
//
// As nginx's proxy_cache does, an answer that sets a cookie, that says it
// must not be kept (Cache-Control no-store, no-cache or private) or that
// varies on anything (Vary: *) is not kept; a Cache-Control max-age
// shortens or lengthens its time. Expires and X-Accel-Expires are not
// read.

import (
	"crypto/sha256"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hostgate/hostgate/router"
)

const (
	// maxAuthCacheEntries bounds the answers one cache keeps.
	maxAuthCacheEntries = 4096
	// maxAuthCacheFields bounds the bytes of the fields an answer keeps;
	// a bigger answer is not kept.
	maxAuthCacheFields = 16 << 10
)

// authCache is the state of one router.AuthCache.
type authCache struct {
	mu      sync.Mutex
	answers map[[sha256.Size]byte]authAnswer
	// used is the registry's Apply count when a table last used it.
	used uint64
}

// authAnswer is a kept answer: its status and the fields that acting on
// it reads.
type authAnswer struct {
	status  int
	header  http.Header
	expires time.Time
}

func newAuthCache() *authCache {
	return &authCache{answers: map[[sha256.Size]byte]authAnswer{}}
}

// authCacheKey is the key of r's answer in the cache c describes.
func authCacheKey(c *router.AuthCache, r *http.Request, ex *exchange) [sha256.Size]byte {
	req := router.Request{Host: r.Host, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Header: r.Header}
	var buf [512]byte
	key := router.AppendKey(buf[:0], hostKey, &req, ex.from.client)
	return sha256.Sum256(router.AppendKey(key, c.Key, &req, ex.from.client))
}

// hostKey puts the request's host first in every key.
var hostKey = []router.HashPart{{Source: router.HashHost}}

// get returns the answer kept under key, if it has not expired.
func (c *authCache) get(key [sha256.Size]byte, now time.Time) (authAnswer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.answers[key]
	if ok && !now.Before(a.expires) {
		delete(c.answers, key)
		return authAnswer{}, false
	}
	return a, ok
}

// put keeps resp under key, for as long as cfg and resp say.
func (c *authCache) put(key [sha256.Size]byte, cfg *router.AuthCache, resp *http.Response, now time.Time) {
	ttl := cfg.TTLFor(resp.StatusCode)
	if ttl <= 0 || resp.Header["Set-Cookie"] != nil || varies(resp.Header) {
		return
	}
	if d, ok := cacheControl(resp.Header); ok {
		ttl = d
	}
	if ttl <= 0 {
		return
	}
	header := make(http.Header, len(resp.Header))
	size := 0
	for name, v := range resp.Header {
		if answerFields[name] || isHopField(name) {
			continue
		}
		for _, s := range v {
			size += len(name) + len(s)
		}
		// Requests get these slices (copyAuthFields): a copy without
		// room to append to makes an append copy them again.
		header[name] = slices.Clip(slices.Clone(v))
	}
	if size > maxAuthCacheFields {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.answers[key]; !ok && len(c.answers) >= maxAuthCacheEntries {
		// A map's range starts at random: the first entry is one drawn
		// at random, expired or not.
		for k := range c.answers {
			delete(c.answers, k)
			break
		}
	}
	c.answers[key] = authAnswer{status: resp.StatusCode, header: header, expires: now.Add(ttl)}
}

func varies(h http.Header) bool {
	for _, v := range h["Vary"] {
		if strings.TrimSpace(v) == "*" {
			return true
		}
	}
	return false
}

// cacheControl reads what Cache-Control says of keeping an answer: a
// time (0 for not at all) and whether it says one.
func cacheControl(h http.Header) (time.Duration, bool) {
	var ttl time.Duration
	said := false
	for _, v := range h["Cache-Control"] {
		for directive := range strings.SplitSeq(v, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(directive), "=")
			switch strings.ToLower(name) {
			case "no-store", "no-cache", "private":
				return 0, true
			case "max-age":
				n, err := strconv.Atoi(strings.Trim(value, `"`))
				if err != nil || n < 0 {
					return 0, true
				}
				ttl, said = time.Duration(min(n, 365*24*3600))*time.Second, true
			}
		}
	}
	return ttl, said
}
