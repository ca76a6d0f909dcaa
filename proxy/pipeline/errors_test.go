package pipeline

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestFailureAfterDeadlineIsTimeout answers 504 (gRPC DEADLINE_EXCEEDED)
// for a request whose deadline has passed even when the transport's error
// is not a timeout, and even before the context's timer has fired: a gRPC
// backend that enforces the same grpc-timeout can reset the stream as the
// transport gives up, or before (TestGRPC's deadline case saw Bad Gateway
// now and then).
func TestFailureAfterDeadlineIsTimeout(t *testing.T) {
	s := newShared(t)
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	contexts := map[string]context.Context{
		"expired":                expired,
		"deadline timer not yet": unfiredDeadline{context.Background(), time.Now().Add(-time.Millisecond)},
	}
	for name, ctx := range contexts {
		for _, grpc := range []bool{false, true} {
			// As ReverseProxy calls it: with the request's exchange.
			req := httptest.NewRequestWithContext(withExchange(ctx, &exchange{}), "POST", "/test.Echo/Sleep", nil)
			if grpc {
				req.Header.Set("Content-Type", "application/grpc")
			}
			rec := httptest.NewRecorder()
			s.fwd.fail(rec, req, errors.New("http2: stream reset by the backend"))
			status, grpcStatus := rec.Code, rec.Header().Get("Grpc-Status")
			if grpc && grpcStatus != "4" || !grpc && status != http.StatusGatewayTimeout {
				t.Errorf("%s, gRPC %v: status %d, grpc-status %q; want 504, or grpc-status 4 (DEADLINE_EXCEEDED) for gRPC", name, grpc, status, grpcStatus)
			}
		}
	}
}

// unfiredDeadline is a context whose deadline has passed but whose timer
// has not fired yet: its Err is still nil, as a context's is on a busy
// machine for a moment after its deadline.
type unfiredDeadline struct {
	context.Context
	at time.Time
}

func (c unfiredDeadline) Deadline() (time.Time, bool) { return c.at, true }
