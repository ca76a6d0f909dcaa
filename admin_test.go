package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestProfilingOnlyWhenAsked: the admin port serves Go's profiles with
// --profiling and not without, as it has no authentication.
func TestProfilingOnlyWhenAsked(t *testing.T) {
	for _, on := range []bool{false, true} {
		a := &admin{ready: func() bool { return true }, current: new(atomic.Pointer[generation]), gatherer: prometheus.NewRegistry(), profiling: on}
		srv := httptest.NewServer(a.handler())
		resp, err := http.Get(srv.URL + "/debug/pprof/heap?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		served := resp.StatusCode == http.StatusOK && strings.Contains(string(body), "heap profile")
		if served != on {
			t.Errorf("profiling %v: GET /debug/pprof/heap answered %d %.40q", on, resp.StatusCode, body)
		}
	}
}
