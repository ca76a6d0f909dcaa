package pipeline

import (
	"net/http"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// discardFields is a headerEditor that keeps nothing: the benchmark counts
// the filter's own work, not an engine's field list.
type discardFields struct{}

func (discardFields) Set(string, string) {}
func (discardFields) Add(string, string) {}
func (discardFields) Del(string)         {}

// BenchmarkCORS is a CORS filter's own work for an allowed cross-origin
// request and for a preflight: deciding, and the allow fields.
func BenchmarkCORS(b *testing.B) {
	c := &router.CORS{
		AllowOrigins:     []router.Origin{mustOrigin(b, "https://app.example.com"), mustOrigin(b, "https://*.example.org")},
		AllowMethods:     []string{"GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"},
		AllowHeaders:     []string{"Authorization", "Content-Type"},
		AllowCredentials: true,
		MaxAge:           20 * 24 * time.Hour,
	}
	for _, tc := range []struct {
		name   string
		method string
		header http.Header
	}{
		{"simple", "GET", http.Header{"Origin": {"https://ui.example.org"}}},
		{"preflight", "OPTIONS", http.Header{"Origin": {"https://app.example.com"}, "Access-Control-Request-Method": {"PUT"}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			req := router.Request{Method: tc.method, Path: "/", Header: tc.header}
			b.ReportAllocs()
			for b.Loop() {
				var p plan
				preflight := p.applyCORS(c, &req)
				if p.allowOrigin == "" {
					b.Fatal("origin refused")
				}
				corsFields(&p, discardFields{})
				if preflight {
					preflightFields(&p, req.Header, discardFields{})
				}
			}
		})
	}
}

func mustOrigin(b *testing.B, s string) router.Origin {
	o, err := router.ParseOrigin(s)
	if err != nil {
		b.Fatal(err)
	}
	return o
}
