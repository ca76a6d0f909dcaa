package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hostgate/hostgate/internal/streamtest"
	"github.com/hostgate/hostgate/router"
)

func TestGRPC(t *testing.T) {
	f := newTLSFixture(t)
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"grpc": {{Address: streamtest.StartGRPC(t, "127.0.0.1:0")}}, "down": {{Address: deadAddr(t)}}})
	grpcRoute := func(name, service string, backend string) router.Route {
		return router.Route{
			ID:        router.RouteID{Kind: router.KindGRPCRoute, Namespace: "ns", Name: name},
			Hostnames: []string{"grpc.test"},
			Rules: []router.Rule{{
				Matches:  []router.Match{{GRPC: &router.GRPCMatch{Service: service}}},
				Backends: backends(backend),
			}},
		}
	}
	routes := compile(t, grpcRoute("echo", "test.Echo", "grpc"), grpcRoute("down", "test.Down", "down"))
	addrs := apply(t, s,
		Listener{Address: "127.0.0.1:0", Protocol: HTTP, Routes: routes},
		Listener{Address: freeAddr(t), Protocol: HTTPS, Routes: routes, TLS: f.store(t, "grpc.test")},
	)
	for i, creds := range []credentials.TransportCredentials{
		insecure.NewCredentials(),
		credentials.NewTLS(&tls.Config{RootCAs: f.ca.Pool, ServerName: "grpc.test", MinVersion: tls.VersionTLS12}),
	} {
		t.Run(creds.Info().SecurityProtocol, func(t *testing.T) {
			conn, err := grpc.NewClient("passthrough:///"+addrs[i],
				grpc.WithTransportCredentials(creds),
				grpc.WithAuthority("grpc.test"),
				grpc.WithDefaultCallOptions(grpc.ForceCodec(streamtest.RawCodec{})))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			testGRPCCalls(t, conn)
		})
	}
}

func testGRPCCalls(t *testing.T, conn *grpc.ClientConn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := func(name string, i int) grpc.ClientStream {
		t.Helper()
		cs, err := conn.NewStream(ctx, &streamtest.EchoService.Streams[i], "/test.Echo/"+name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return cs
	}
	recvAll := func(cs grpc.ClientStream) []string {
		t.Helper()
		var got []string
		for {
			var msg []byte
			if err := cs.RecvMsg(&msg); errors.Is(err, io.EOF) {
				return got
			} else if err != nil {
				t.Fatalf("receive: %v", err)
			}
			got = append(got, string(msg))
		}
	}
	send := func(cs grpc.ClientStream, msgs ...string) {
		t.Helper()
		for _, m := range msgs {
			b := []byte(m)
			if err := cs.SendMsg(&b); err != nil {
				t.Fatalf("send: %v", err)
			}
		}
		if err := cs.CloseSend(); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("unary with trailer", func(t *testing.T) {
		in, out := []byte("hi"), []byte(nil)
		var trailer metadata.MD
		if err := conn.Invoke(ctx, "/test.Echo/Say", &in, &out, grpc.Trailer(&trailer)); err != nil {
			t.Fatal(err)
		}
		if string(out) != "said hi" || trailer.Get("x-trailer")[0] != "kept" {
			t.Errorf("got %q, trailer %v", out, trailer)
		}
	})
	t.Run("server streaming", func(t *testing.T) {
		cs := stream("Count", 0)
		send(cs, "go")
		if got := recvAll(cs); len(got) != 3 || got[2] != "three" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("client streaming", func(t *testing.T) {
		cs := stream("Sum", 1)
		send(cs, "a", "b", "c")
		if got := recvAll(cs); len(got) != 1 || got[0] != "abc" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("bidirectional", func(t *testing.T) {
		cs := stream("Chat", 2)
		for _, m := range []string{"x", "y"} {
			b := []byte(m)
			if err := cs.SendMsg(&b); err != nil {
				t.Fatal(err)
			}
			var reply []byte
			if err := cs.RecvMsg(&reply); err != nil || string(reply) != "re: "+m {
				t.Fatalf("reply %q, %v", reply, err)
			}
		}
		send(cs)
		if got := recvAll(cs); len(got) != 0 {
			t.Errorf("extra replies %q", got)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer dcancel()
		in, out := []byte{}, []byte(nil)
		err := conn.Invoke(dctx, "/test.Echo/Sleep", &in, &out)
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("err = %v, want DeadlineExceeded", err)
		}
	})
	for _, tt := range []struct {
		method string
		code   codes.Code
	}{
		{"/test.Down/Any", codes.Unavailable},
		{"/test.Missing/Any", codes.Unimplemented},
	} {
		t.Run(tt.method, func(t *testing.T) {
			in, out := []byte{}, []byte(nil)
			err := conn.Invoke(ctx, tt.method, &in, &out)
			if status.Code(err) != tt.code {
				t.Errorf("err = %v, want %v", err, tt.code)
			}
		})
	}
}
