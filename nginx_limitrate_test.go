package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestIngressNginxLimitRate downloads 256 KiB through an Ingress with
// limit-rate: 64 and limit-rate-after: 64, on the native HTTP/1.1 engine
// (over HTTP/1.1 and h2c) and on net/http's: the first 64 KiB, and a
// second's worth at the rate, come at once, the rest at 64 KiB/s, so the
// whole takes about 2s as from nginx; an Ingress without limit-rate
// serves it at once.
func TestIngressNginxLimitRate(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 256<<10)
	_, addr := serveHTTP(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(body)
	}))
	dir := t.TempDir()
	writeConfig(t, dir, trafficService("app", addr2port(t, addr))+
		trafficIngress("limited", "limited.example.com", "app", "limit-rate", "64", "limit-rate-after", "64")+
		trafficIngress("free", "free.example.com", "app"))
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	for _, tc := range []struct {
		engine string
		client *http.Client
	}{{"native", http.DefaultClient}, {"native", &http.Client{Transport: h2c}}, {"stdlib", http.DefaultClient}} {
		t.Run(fmt.Sprintf("%s/h2c=%t", tc.engine, tc.client != http.DefaultClient), func(t *testing.T) {
			httpPort := freePort(t)
			startHostgate(t, "--config", dir, "--ingress-class", "nginx", "--http1-engine", tc.engine, "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
			url := fmt.Sprintf("http://127.0.0.1:%d/", httpPort)
			eventually(t, "served", expect(url, "free.example.com", 200, "xxx"))
			download := func(host string) (first, all time.Duration) {
				req, _ := http.NewRequest("GET", url, nil)
				req.Host = host
				start := time.Now()
				resp, err := tc.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if _, err := io.ReadFull(resp.Body, make([]byte, 100<<10)); err != nil {
					t.Fatal(err)
				}
				first = time.Since(start)
				rest, err := io.ReadAll(resp.Body)
				if err != nil || len(rest) != len(body)-100<<10 {
					t.Fatalf("%s: read %d bytes more, %v", host, len(rest), err)
				}
				return first, time.Since(start)
			}
			if first, all := download("limited.example.com"); first > 700*time.Millisecond || all < 1700*time.Millisecond || all > 3500*time.Millisecond {
				t.Errorf("limited: the first 100 KiB after %v, all 256 KiB after %v; want at once, then about 2s", first, all)
			}
			if _, all := download("free.example.com"); all > time.Second {
				t.Errorf("without limit-rate: 256 KiB after %v", all)
			}
		})
	}
}
