// Command loadgen is the part of bench/run.sh that no Debian package
// provides: an HTTP/3 load client (Debian's h2load is built without
// QUIC), a gRPC unary load loop that checks every grpc-status (h2load
// would count an HTTP 200 with a failed call as a success), and the gRPC
// upstream both are measured against.
//
//	loadgen grpc-upstream ADDR
//	loadgen h3   [-c N] [-m N] [-d DUR] URL
//	loadgen grpc [-c N] [-m N] [-d DUR] ADDR
//	loadgen parse wrk OUTPUT | parse h2load OUTPUT LOG
//	loadgen table RESULTS [BASELINE-PROXY]
//
// A load run, and parse of wrk's or h2load's output, print one line:
//
//	requests=N errors=N rps=F p50_ms=F p99_ms=F
//
// run.sh prefixes each with the scenario, proxy and round, and table
// turns the lines of all rounds into the Markdown table of medians.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/quic-go/quic-go/http3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	if err := dispatch(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func dispatch(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: loadgen grpc-upstream ADDR | h3 [flags] URL | grpc [flags] ADDR | parse TOOL OUTPUT [LOG] | table RESULTS [BASELINE]")
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "grpc-upstream":
		if len(rest) != 1 {
			return errors.New("usage: loadgen grpc-upstream ADDR")
		}
		l, err := net.Listen("tcp", rest[0])
		if err != nil {
			return err
		}
		return serveGRPC(l)
	case "h3", "grpc":
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		conns := fs.Int("c", 16, "connections")
		streams := fs.Int("m", 8, "concurrent requests per connection")
		d := fs.Duration("d", 10*time.Second, "duration")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() != 1 || *conns < 1 || *streams < 1 || *d <= 0 {
			return fmt.Errorf("usage: loadgen %s [-c N>0] [-m N>0] [-d DUR>0] TARGET", cmd)
		}
		dial := dialH3
		if cmd == "grpc" {
			dial = dialGRPC
		}
		res, err := run(*conns, *streams, *d, func() (call, func(), error) { return dial(fs.Arg(0)) })
		if err != nil {
			return err
		}
		fmt.Println(res)
		return nil
	case "parse":
		return parseCmd(rest)
	case "table":
		return tableCmd(rest)
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// serveGRPC serves grpc.health.v1.Health over h2c: a real grpc-go server
// with a generated unary method, so the bench needs no code generation.
func serveGRPC(l net.Listener) error {
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	return s.Serve(l)
}

// The proxies under test present a self-signed certificate made for
// the run, so clients skip verification.
func insecureTLS(protos ...string) *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, NextProtos: protos}
}

// dialH3 gives a connection of its own: one http3.Transport holds one
// QUIC connection per server.
func dialH3(url string) (call, func(), error) {
	tr := &http3.Transport{TLSClientConfig: insecureTLS(http3.NextProtoH3)}
	client := &http.Client{Transport: tr}
	do := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
	return do, func() { tr.Close() }, nil
}

// dialGRPC gives a connection of its own: each grpc.ClientConn keeps one
// HTTP/2 connection over TLS.
func dialGRPC(addr string) (call, func(), error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(insecureTLS())))
	if err != nil {
		return nil, nil, err
	}
	client := healthpb.NewHealthClient(conn)
	do := func(ctx context.Context) error {
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("Check: %s", resp.GetStatus())
		}
		return nil
	}
	return do, func() { conn.Close() }, nil
}
