package pipeline

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hostgate/hostgate/router"
)

// Responses made by the proxy itself are short plain text, or for gRPC
// calls a trailers-only response carrying a gRPC status, since gRPC
// clients read the status and not the HTTP code.

// errorBodies are the bodies of the statuses the proxy answers itself.
var errorBodies = map[int]string{
	http.StatusBadRequest:            "bad request\n",
	http.StatusRequestTimeout:        "request body too slow\n",
	http.StatusForbidden:             "forbidden\n",
	http.StatusNotFound:              "no route\n",
	http.StatusMisdirectedRequest:    "misdirected request: the Host belongs to another listener than this connection's TLS server name\n",
	http.StatusRequestEntityTooLarge: "request too large\n",
	http.StatusInternalServerError:   "invalid backend\n",
	http.StatusBadGateway:            "backend unreachable\n",
	http.StatusServiceUnavailable:    "no ready endpoint\n",
	http.StatusGatewayTimeout:        "backend timeout\n",
}

// gRPC status codes (google.golang.org/grpc/codes) the proxy answers with.
const (
	grpcDeadlineExceeded = "4"
	grpcUnimplemented    = "12"
	grpcPermissionDenied = "7"
	grpcInternal         = "13"
	grpcUnavailable      = "14"
	grpcUnauthenticated  = "16"
)

// grpcStatus maps an HTTP status to the gRPC code for it, following the
// gRPC HTTP-to-gRPC mapping except that a timeout reads as one.
func grpcStatus(status int) string {
	switch status {
	case http.StatusNotFound:
		return grpcUnimplemented
	case http.StatusGatewayTimeout:
		return grpcDeadlineExceeded
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusMisdirectedRequest, http.StatusTooManyRequests:
		return grpcUnavailable
	case http.StatusUnauthorized:
		return grpcUnauthenticated
	case http.StatusForbidden:
		return grpcPermissionDenied
	}
	return grpcInternal
}

func isGRPC(h router.Headers) bool {
	ct := h.Values("Content-Type")
	return len(ct) > 0 && strings.HasPrefix(ct[0], "application/grpc")
}

// WriteError answers status with its plain-text body, or for a gRPC call
// with its grpc-status.
func WriteError(w http.ResponseWriter, r *http.Request, status int) {
	writeErrorBody(w, r, status, errorBodies[status])
}

// ErrorBody is the plain-text body of status when the proxy answers it.
func ErrorBody(status int) string { return errorBodies[status] }

func writeErrorBody(w http.ResponseWriter, r *http.Request, status int, body string) {
	h := w.Header()
	if isGRPC(r.Header) {
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", grpcStatus(status))
		h.Set("Grpc-Message", http.StatusText(status))
		w.WriteHeader(http.StatusOK)
		return
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// grpcTimeout parses a grpc-timeout header value: up to eight digits and a
// unit. ok is false when there is none or it does not parse.
func grpcTimeout(h router.Headers) (d time.Duration, ok bool) {
	v := h.Values("Grpc-Timeout")
	if len(v) == 0 || len(v[0]) < 2 || len(v[0]) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[0][:len(v[0])-1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	var unit time.Duration
	switch v[0][len(v[0])-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	return time.Duration(n) * unit, true
}
