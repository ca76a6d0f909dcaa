package pipeline

import (
	"crypto/sha256"
	"net/http"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// TestAuthCacheKeeps: an answer is kept for its status's time, or
// Cache-Control's, not at all when it sets a cookie or says so, and a
// cache holds at most maxAuthCacheEntries answers.
func TestAuthCacheKeeps(t *testing.T) {
	cfg := &router.AuthCache{ID: "t", TTLs: []router.AuthCacheTTL{{Codes: []int{200}, TTL: time.Minute}}}
	now := time.Now()
	for _, tc := range []struct {
		status int
		header http.Header
		want   time.Duration
	}{
		{200, http.Header{"X-User": {"a"}}, time.Minute},
		{401, nil, 0},
		{200, http.Header{"Set-Cookie": {"a=1"}}, 0},
		{200, http.Header{"Cache-Control": {"public, max-age=5"}}, 5 * time.Second},
		{200, http.Header{"Cache-Control": {"max-age=0"}}, 0},
		{200, http.Header{"Cache-Control": {"private"}}, 0},
		{200, http.Header{"Vary": {"*"}}, 0},
	} {
		c := newAuthCache()
		key := sha256.Sum256([]byte("k"))
		c.put(key, cfg, &http.Response{StatusCode: tc.status, Header: tc.header}, now)
		a, ok := c.get(key, now)
		switch {
		case ok != (tc.want > 0):
			t.Errorf("%d %v: kept %t, want %t", tc.status, tc.header, ok, tc.want > 0)
		case ok && !a.expires.Equal(now.Add(tc.want)):
			t.Errorf("%d %v: kept until %v, want %v", tc.status, tc.header, a.expires.Sub(now), tc.want)
		}
		if ok {
			if _, still := c.get(key, now.Add(tc.want)); still {
				t.Errorf("%d %v: kept past its time", tc.status, tc.header)
			}
		}
	}
	c := newAuthCache()
	for i := range maxAuthCacheEntries + 100 {
		c.put(sha256.Sum256([]byte{byte(i), byte(i >> 8)}), cfg, &http.Response{StatusCode: 200, Header: http.Header{}}, now)
	}
	if n := len(c.answers); n != maxAuthCacheEntries {
		t.Errorf("%d answers kept, want at most %d", n, maxAuthCacheEntries)
	}
}
