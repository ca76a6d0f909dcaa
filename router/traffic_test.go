package router

import (
	"net/http"
	"net/netip"
	"regexp"
	"testing"
)

// TestCanaryChoose: header, then cookie, then weight, as ingress-nginx
// decides.
func TestCanaryChoose(t *testing.T) {
	always := &Canary{Header: "X-Canary", Cookie: "c"}
	value := &Canary{Header: "X-Canary", HeaderValue: "v2", Cookie: "c"}
	pattern := &Canary{Header: "X-Canary", HeaderPattern: regexp.MustCompile(`v[2-9]`)}
	for _, tc := range []struct {
		c      *Canary
		header http.Header
		want   CanaryChoice
	}{
		{always, nil, CanaryByWeight},
		{always, http.Header{"X-Canary": {"always"}}, CanaryAlways},
		{always, http.Header{"X-Canary": {"never"}, "Cookie": {"c=always"}}, CanaryNever},
		{always, http.Header{"X-Canary": {"other"}, "Cookie": {"c=always"}}, CanaryAlways},
		{always, http.Header{"Cookie": {"x=1", "a=b; c=never"}}, CanaryNever},
		{always, http.Header{"Cookie": {"c=sometimes"}}, CanaryByWeight},
		{value, http.Header{"X-Canary": {"v2"}}, CanaryAlways},
		{value, http.Header{"X-Canary": {"always"}}, CanaryByWeight},
		{value, http.Header{"X-Canary": {"never"}, "Cookie": {"c=always"}}, CanaryAlways},
		{pattern, http.Header{"X-Canary": {"build-v3"}}, CanaryAlways},
		{pattern, http.Header{"X-Canary": {"v1"}}, CanaryByWeight},
	} {
		if got := tc.c.Choose(tc.header); got != tc.want {
			t.Errorf("%s with %v: %d, want %d", tc.c, tc.header, got, tc.want)
		}
	}
}

func TestCookieValue(t *testing.T) {
	h := http.Header{"Cookie": {`a=1; route="abc"`, "b=2;c=3"}}
	for name, want := range map[string]string{"a": "1", "route": "abc", "c": "3", "d": ""} {
		if got, ok := CookieValue(h, name); got != want || ok != (want != "") {
			t.Errorf("cookie %s: %q %t, want %q", name, got, ok, want)
		}
	}
}

// TestHashKey: the key depends on the named values only, and computing
// it allocates nothing.
func TestHashKey(t *testing.T) {
	b := &Balance{Hash: []HashPart{{Source: HashHost}, {Source: HashText, Name: "-"}, {Source: HashQuery, Name: "id"}, {Source: HashCookie, Name: "s"}, {Source: HashClient}}}
	client := netip.MustParseAddr("192.0.2.1")
	req := func(host, query, cookie string) *Request {
		return &Request{Host: host, Path: "/x", RawQuery: query, Header: http.Header{"Cookie": {cookie}}}
	}
	k := b.HashKey(req("A.example:8080", "id=7&z=1", "s=1"), client)
	if k != b.HashKey(req("a.example", "z=2&id=7", "t=2; s=1"), client) {
		t.Error("the same values hashed differently")
	}
	if k == b.HashKey(req("a.example", "id=8", "s=1"), client) || k == b.HashKey(req("a.example", "id=7", "s=1"), netip.MustParseAddr("192.0.2.2")) {
		t.Error("other values hashed the same")
	}
	r := req("a.example", "id=7", "s=1")
	if n := testing.AllocsPerRun(100, func() { b.HashKey(r, client) }); n != 0 {
		t.Errorf("HashKey: %v allocations", n)
	}
}

// TestAppendKey: the values a cache key is made of end where they end,
// so that values split elsewhere make another key.
func TestAppendKey(t *testing.T) {
	parts := []HashPart{{Source: HashHeader, Name: "A"}, {Source: HashHeader, Name: "B"}}
	key := func(a, b string) string {
		return string(AppendKey(nil, parts, &Request{Header: http.Header{"A": {a}, "B": {b}}}, netip.Addr{}))
	}
	if key("ab", "c") == key("a", "bc") {
		t.Error("values split differently made the same key")
	}
	if key("ab", "c") != "ab\x00c\x00" {
		t.Errorf("key %q", key("ab", "c"))
	}
}

// TestAffinitySession: a canary's session cookies and the main backend's
// share a name and are told apart by the canary's prefix.
func TestAffinitySession(t *testing.T) {
	main, canary := &Affinity{Cookie: "route"}, &Affinity{Cookie: "route", Canary: true}
	for value, want := range map[string][2]bool{
		"00000000000000ff":  {true, false},
		"c00000000000000ff": {false, true},
		"00ff":              {false, false},
		"c00ff":             {false, false},
		"zzzzzzzzzzzzzzzz":  {false, false},
	} {
		h := http.Header{"Cookie": {"route=" + value}}
		_, m := main.Session(h)
		_, c := canary.Session(h)
		if [2]bool{m, c} != want {
			t.Errorf("cookie %q: a session of the main backend %t, of the canary %t; want %v", value, m, c, want)
		}
	}
}

func TestValidateTraffic(t *testing.T) {
	rule := func(c *Canary, canary bool) *Rule {
		return &Rule{Canary: c, Backends: []BackendRef{{Name: "a", Weight: 1}, {Name: "b", Weight: 1, Canary: canary}}}
	}
	if err := validateRule(KindIngress, rule(&Canary{Header: "X-Canary"}, true)); err != nil {
		t.Error(err)
	}
	for _, r := range []*Rule{rule(&Canary{Header: "X-Canary"}, false), rule(&Canary{Header: "x-canary"}, true), rule(&Canary{Cookie: "a;b"}, true)} {
		if validateRule(KindIngress, r) == nil {
			t.Errorf("%s: valid", r.Canary)
		}
	}
	for _, b := range []Balance{
		{Affinity: &Affinity{Cookie: "a b"}},
		{Affinity: &Affinity{Cookie: "a", Path: "/x; Domain=evil"}},
		{Affinity: &Affinity{Cookie: "a", SameSite: "lax"}},
		{Hash: []HashPart{{Source: HashHeader}}},
	} {
		if validateBalance(&b) == nil {
			t.Errorf("%s: valid", &b)
		}
	}
}
