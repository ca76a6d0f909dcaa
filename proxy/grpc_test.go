package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hostgate/hostgate/router"
)

// rawCodec passes messages as bytes, so the test service needs no
// generated code.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

// echoService is test.Echo: Say (unary, with a trailer), Sleep (unary,
// until the deadline), Count (server streaming), Sum (client streaming)
// and Chat (bidirectional).
var echoService = grpc.ServiceDesc{
	ServiceName: "test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Say", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			if err := grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "kept")); err != nil {
				return nil, err
			}
			out := append([]byte("said "), in...)
			return &out, nil
		}},
		{MethodName: "Sleep", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}},
	},
	Streams: []grpc.StreamDesc{
		{StreamName: "Count", ServerStreams: true, Handler: func(_ any, stream grpc.ServerStream) error {
			for _, s := range []string{"one", "two", "three"} {
				msg := []byte(s)
				if err := stream.SendMsg(&msg); err != nil {
					return err
				}
			}
			return nil
		}},
		{StreamName: "Sum", ClientStreams: true, Handler: func(_ any, stream grpc.ServerStream) error {
			var all []byte
			for {
				var in []byte
				if err := stream.RecvMsg(&in); errors.Is(err, io.EOF) {
					return stream.SendMsg(&all)
				} else if err != nil {
					return err
				}
				all = append(all, in...)
			}
		}},
		{StreamName: "Chat", ServerStreams: true, ClientStreams: true, Handler: func(_ any, stream grpc.ServerStream) error {
			for {
				var in []byte
				if err := stream.RecvMsg(&in); errors.Is(err, io.EOF) {
					return nil
				} else if err != nil {
					return err
				}
				out := append([]byte("re: "), in...)
				if err := stream.SendMsg(&out); err != nil {
					return err
				}
			}
		}},
	},
}

func startGRPCBackend(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	srv.RegisterService(&echoService, struct{}{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func TestGRPC(t *testing.T) {
	f := newTLSFixture(t)
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"grpc": {{Address: startGRPCBackend(t)}}, "down": {{Address: deadAddr(t)}}})
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
				grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
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
		cs, err := conn.NewStream(ctx, &echoService.Streams[i], "/test.Echo/"+name)
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
