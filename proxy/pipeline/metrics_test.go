package pipeline

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

// TestClassify covers the error kinds that sockets on loopback do not
// produce on demand.
func TestClassify(t *testing.T) {
	dial := func(err error) error {
		return fmt.Errorf("round trip: %w", &net.OpError{Op: "dial", Net: "tcp", Err: err})
	}
	read := func(err error) error { return &net.OpError{Op: "read", Net: "tcp", Err: err} }
	tests := []struct {
		err  error
		want errorKind
	}{
		{dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), errConnectRefused},
		{dial(os.ErrDeadlineExceeded), errConnectTimeout},
		{dial(errors.New("no route to host")), errOther},
		{read(os.NewSyscallError("read", syscall.ECONNRESET)), errReset},
		{io.ErrUnexpectedEOF, errReset},
		{read(os.ErrDeadlineExceeded), errTimeout},
		{fmt.Errorf("tls: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), errTLS},
		{tls.AlertError(40), errTLS},
		{errors.New("malformed HTTP response"), errOther},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("classify(%v) = %s, want %s", tt.err, errorKindNames[got], errorKindNames[tt.want])
		}
	}
}
