package pipeline

import (
	"testing"

	"github.com/hostgate/hostgate/router"
)

var testResponseRewrite = &router.ResponseRewrite{
	CookieDomain: &router.Replacement{From: "internal.local", To: "example.com"},
	CookiePath:   &router.Replacement{From: "/app", To: "/"},
	Redirect:     &router.Replacement{From: "http://internal.local/", To: "https://example.com/shop/"},
}

// TestRewriteField covers the attribute parsing that nginx's
// proxy_cookie_domain, proxy_cookie_path and proxy_redirect do.
func TestRewriteField(t *testing.T) {
	for _, tt := range []struct{ name, value, want string }{
		{"Set-Cookie", "a=b; Domain=internal.local; Path=/app/x", "a=b; Domain=example.com; Path=//x"},
		{"Set-Cookie", "a=b;domain=.Internal.LOCAL;path=/app", "a=b;domain=.example.com;path=/"},
		{"Set-Cookie", "a=b; Path = /app ; HttpOnly", "a=b; Path = / ; HttpOnly"},
		{"Set-Cookie", "a=b; Domain=sub.internal.local; Path=/apple", "a=b; Domain=sub.internal.local; Path=/le"},
		{"Set-Cookie", "a=b; Path=/other", "a=b; Path=/other"},
		// The cookie itself is no attribute, whatever its name.
		{"Set-Cookie", "path=/app; Secure", "path=/app; Secure"},
		{"Set-Cookie", "a=b; Domain=internal.local;", "a=b; Domain=example.com;"},
		{"Location", "http://internal.local/x?y=1", "https://example.com/shop/x?y=1"},
		{"Location", "http://INTERNAL.local/x", "http://INTERNAL.local/x"},
		{"Location", "/relative", "/relative"},
		{"Refresh", "5; URL=http://internal.local/x", "5; URL=https://example.com/shop/x"},
		{"Refresh", "5", "5"},
		{"Content-Location", "http://internal.local/x", "http://internal.local/x"},
	} {
		if got := rewriteField(testResponseRewrite, tt.name, tt.value); got != tt.want {
			t.Errorf("%s: %q → %q, want %q", tt.name, tt.value, got, tt.want)
		}
	}
	if got := rewriteField(&router.ResponseRewrite{Redirect: testResponseRewrite.Redirect}, "Set-Cookie", "a=b; Domain=internal.local"); got != "a=b; Domain=internal.local" {
		t.Errorf("a rewrite of redirects changed a cookie: %q", got)
	}
}
