package router

import "testing"

// TestValidateResponseRewriteAndSatisfy: a rewrite's texts go into header
// fields, and satisfy any needs the password it offers as the other way in.
func TestValidateResponseRewriteAndSatisfy(t *testing.T) {
	rewrite := func(rw ResponseRewrite) *Rule {
		return &Rule{Backends: []BackendRef{{Name: "a", Weight: 1}}, Filters: []Filter{{Type: FilterResponseRewrite, ResponseRewrite: &rw}}}
	}
	if err := validateRule(KindIngress, rewrite(ResponseRewrite{CookieDomain: &Replacement{From: "internal.local", To: "example.com"}})); err != nil {
		t.Error(err)
	}
	for _, rw := range []ResponseRewrite{
		{},
		{CookiePath: &Replacement{To: "/"}},
		{CookiePath: &Replacement{From: "/a", To: "/; Domain=evil"}},
		{Redirect: &Replacement{From: "http://a/", To: "http://b/\r\nX: y"}},
	} {
		if validateRule(KindIngress, rewrite(rw)) == nil {
			t.Errorf("%+v: valid", rw)
		}
	}
	allow, err := ParseAddressSet("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	access := Filter{Type: FilterAccess, Access: &Access{Allow: allow, SatisfyAny: true}}
	auth := Filter{Type: FilterBasicAuth, BasicAuth: &BasicAuth{Source: "Secret default/u", Realm: "r"}}
	for _, c := range []struct {
		filters []Filter
		valid   bool
	}{{[]Filter{access, auth}, true}, {[]Filter{access}, false}, {[]Filter{auth, access}, false}} {
		r := &Rule{Backends: []BackendRef{{Name: "a", Weight: 1}}, Filters: c.filters}
		if err := validateRule(KindIngress, r); (err == nil) != c.valid {
			t.Errorf("%d filters: %v, want valid %v", len(c.filters), err, c.valid)
		}
	}
}
