package router

import (
	"strings"
	"testing"
)

func TestParseOrigin(t *testing.T) {
	tests := []struct {
		in   string
		want Origin
		err  string
	}{
		{in: "*", want: Origin{}},
		{in: "https://www.foo.com", want: Origin{Scheme: "https", Host: "www.foo.com"}},
		{in: "http://WWW.Foo.com:8080", want: Origin{Scheme: "http", Host: "www.foo.com", Port: 8080}},
		{in: "https://*.bar.com", want: Origin{Scheme: "https", Host: "*.bar.com"}},
		{in: "https://*", want: Origin{Scheme: "https", Host: "*"}},
		{in: "http://10.0.0.1:80", want: Origin{Scheme: "http", Host: "10.0.0.1", Port: 80}},
		{in: "ftp://foo.com", err: `"ftp://foo.com": must be "*" or begin with http:// or https://`},
		{in: "HTTPS://foo.com", err: "begin with http:// or https://"},
		{in: "foo.com", err: "begin with http:// or https://"},
		{in: "https://foo.com/", err: `"https://foo.com/": host: must be DNS labels`},
		{in: "https://user@foo.com", err: "host: must be DNS labels"},
		{in: "https://foo.*.com", err: "host: must be DNS labels"},
		{in: "https://*foo.com", err: "host: must be DNS labels"},
		{in: "https://foo..com", err: "host: must be DNS labels"},
		{in: "https://", err: "host: must be DNS labels"},
		{in: "https://[::1]", err: `"https://[::1]": port:`},
		{in: "https://foo.com:0", err: "port: must be a number from 1 to 65535"},
		{in: "https://foo.com:65536", err: "port: must be a number"},
		{in: "https://foo.com:+80", err: "port: must be a number"},
		{in: "https://foo.com:", err: "port: must be a number"},
		{in: "https://foo.com:80:80", err: "port: must be a number"},
		{in: "https://" + strings.Repeat("a.", 127) + "com", err: "host: longer than 253 characters"},
	}
	for _, tt := range tests {
		got, err := ParseOrigin(tt.in)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("ParseOrigin(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseOrigin(%q) error %v, want one with %q", tt.in, err, tt.err)
		}
	}
}

func TestAllowsOrigin(t *testing.T) {
	cors := func(origins ...string) *CORS {
		c := &CORS{}
		for _, s := range origins {
			o, err := ParseOrigin(s)
			if err != nil {
				t.Fatal(err)
			}
			c.AllowOrigins = append(c.AllowOrigins, o)
		}
		return c
	}
	listed := cors("https://www.foo.com", "https://*.bar.com", "http://local.test:8080")
	tests := []struct {
		c      *CORS
		origin string
		want   bool
	}{
		{listed, "https://www.foo.com", true},
		{listed, "https://WWW.FOO.COM", true},
		{listed, "https://www.foo.com:443", true},
		{listed, "https://www.foo.com:8443", false},
		{listed, "http://www.foo.com", false},
		{listed, "https://foo.com", false},
		{listed, "https://www.foo.com.evil.com", false},
		{listed, "https://a.bar.com", true},
		{listed, "https://xpto.www.bar.com", true},
		{listed, "https://bar.com", false},
		{listed, "https://evilbar.com", false},
		{listed, "https://.bar.com", false},
		{listed, "http://local.test:8080", true},
		{listed, "http://local.test", false},
		{listed, "null", false},
		{listed, "", false},
		{cors("https://*"), "https://anything.test", true},
		{cors("https://*"), "https://anything.test:8443", false},
		{cors("https://*"), "http://anything.test", false},
		{cors("*"), "null", true},
		{cors("*"), "https://foobar.com:12345", true},
		{cors(), "https://www.foo.com", false},
	}
	for _, tt := range tests {
		if got := tt.c.AllowsOrigin(tt.origin); got != tt.want {
			t.Errorf("%v allows %q: %v, want %v", tt.c.AllowOrigins, tt.origin, got, tt.want)
		}
	}
}
