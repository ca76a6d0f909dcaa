package streamtest

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// RawCodec passes messages as bytes, so the test service needs no
// generated code.
type RawCodec struct{}

func (RawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (RawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (RawCodec) Name() string { return "raw" }

// EchoService is test.Echo: Say (unary, with a trailer), Sleep (unary,
// until the deadline), Count (server streaming), Sum (client streaming)
// and Chat (bidirectional).
var EchoService = grpc.ServiceDesc{
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

// StartGRPC serves EchoService on a new listener at address (host:port,
// port 0 for any) until the test ends, and returns the address it got.
func StartGRPC(t testing.TB, address string) string {
	t.Helper()
	ln, err := net.Listen("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(RawCodec{}))
	srv.RegisterService(&EchoService, struct{}{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}
