package main

import (
	"strings"
	"testing"
)

// Output of wrk 4.1.0 (Debian) with --latency.
const wrkOut = `Running 2s test @ http://127.0.0.1:18990/
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   421.88us    1.66ms  25.17ms   95.54%
    Req/Sec    98.40k    18.57k  123.03k    61.90%
  Latency Distribution
     50%  108.00us
     75%  130.00us
     90%  329.00us
     99%    6.60ms
  205148 requests in 2.10s, 31.50MB read
  Socket errors: connect 0, read 3, write 0, timeout 2
  Non-2xx or 3xx responses: 7
Requests/sec:  97709.97
Transfer/sec:     15.00MB
`

func TestParseWrk(t *testing.T) {
	got, err := parseWrk(wrkOut)
	if err != nil {
		t.Fatal(err)
	}
	if want := "requests=205148 errors=12 rps=97710.0 p50_ms=0.108 p99_ms=6.600"; got != want {
		t.Errorf("parseWrk = %q, want %q", got, want)
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused\n"); err == nil {
		t.Error("parseWrk accepted output without results")
	}
}

// Output of h2load 1.52.0 and its --log-file: five requests, one failed.
const h2loadOut = `finished in 2.00s, 2.50 req/s, 13.00MB/s
requests: 5 total, 5 started, 5 done, 4 succeeded, 1 failed, 0 errored, 0 timeout
status codes: 4 2xx, 0 3xx, 0 4xx, 1 5xx
`
const h2loadLog = "1795312848539401\t200\t4000\n1795312848539552\t200\t1000\n1795312848539419\t503\t9000\n" +
	"1795312848539500\t200\t3000\n1795312848539600\t200\t2000\n"

func TestParseH2load(t *testing.T) {
	got, err := parseH2load(h2loadOut, strings.NewReader(h2loadLog))
	if err != nil {
		t.Fatal(err)
	}
	// The failed request's 9 ms is not a latency of a success.
	if want := "requests=4 errors=1 rps=2.5 p50_ms=2.000 p99_ms=4.000"; got != want {
		t.Errorf("parseH2load = %q, want %q", got, want)
	}
	if _, err := parseH2load(h2loadOut, strings.NewReader("1\t200\tx\n")); err == nil {
		t.Error("parseH2load accepted a log line without a duration")
	}
}

func TestTable(t *testing.T) {
	results := `h1 nginx 1 requests=1 errors=0 rps=100 p50_ms=1 p99_ms=4 cpu_pct=99
h1 hostgate 1 requests=1 errors=1 rps=120 p50_ms=1 p99_ms=2 cpu_pct=97
h1 nginx 2 requests=1 errors=0 rps=90 p50_ms=1 p99_ms=6 cpu_pct=98
h1 hostgate 2 requests=1 errors=0 rps=180 p50_ms=1 p99_ms=3 cpu_pct=99
h1 nginx 3 requests=1 errors=0 rps=110 p50_ms=3 p99_ms=5 cpu_pct=100
h1 hostgate 3 requests=1 errors=2 rps=150 p50_ms=1 p99_ms=2.5 cpu_pct=100
h3 hostgate 1 requests=1 errors=0 rps=1000 p50_ms=1 p99_ms=2
h3 nginx n/a built without HTTP/3
`
	samples, err := readSamples(strings.NewReader(results))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	table(&b, samples, "nginx")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		// CPU per request: 99% of a second over 100 requests is 9,900 µs.
		"| h1 | nginx | 100 (90–110) | 1.00 | 5.00 (4.00–6.00) | 1.00× | 1.00× | 99% | 9900.0 µs | 0 | 3 |",
		"| h1 | hostgate | 150 (120–180) | 1.00 | 2.50 (2.00–3.00) | 1.50× | 0.50× | 99% | 6666.7 µs | 3 | 3 |",
		"| h3 | nginx | n/a: built without HTTP/3 | | | | | | | | |",
		"| h3 | hostgate | 1,000 (1,000–1,000) | 1.00 | 2.00 (2.00–2.00) | – | – | – | – | 0 | 1 |",
	}
	if len(lines) != 2+len(want) {
		t.Fatalf("table has %d lines, want %d:\n%s", len(lines), 2+len(want), b.String())
	}
	for i, w := range want {
		if lines[2+i] != w {
			t.Errorf("row %d:\n got %s\nwant %s", i, lines[2+i], w)
		}
	}
}

func TestReadSamplesRejects(t *testing.T) {
	for _, in := range []string{
		"h1 nginx 1\n",
		"h1 nginx 1 rps=abc p50_ms=1 p99_ms=1\n",
		"h1 nginx 1 p50_ms=1 p99_ms=1\n",
	} {
		if _, err := readSamples(strings.NewReader(in)); err == nil {
			t.Errorf("readSamples(%q) succeeded", in)
		}
	}
}
