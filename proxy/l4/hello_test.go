package l4

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// clientHello records the ClientHello crypto/tls sends for serverName.
func clientHello(t testing.TB, serverName string) []byte {
	t.Helper()
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		c := tls.Client(client, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""})
		_ = c.Handshake()
		c.Close()
	}()
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	raw, _, err := readHello(server)
	if err != nil {
		t.Fatalf("read crypto/tls's ClientHello: %v", err)
	}
	return raw
}

// splitRecords re-frames a single-record ClientHello into records of at
// most size bytes of fragment each, as a client may.
func splitRecords(raw []byte, size int) []byte {
	body := raw[recordHeaderSize:]
	var out []byte
	for len(body) > 0 {
		n := min(size, len(body))
		out = append(out, recordHandshake, raw[1], raw[2], byte(n>>8), byte(n))
		out = append(out, body[:n]...)
		body = body[n:]
	}
	return out
}

func TestReadHello(t *testing.T) {
	hello := clientHello(t, "Db.Example.COM")
	noSNI := clientHello(t, "")
	tooLarge := append([]byte{recordHandshake, 3, 1, 0x40, 0x00, handshakeHello, 0x01, 0x00, 0x00}, make([]byte, 16<<10-4)...)
	for _, c := range []struct {
		name    string
		in      []byte
		want    string
		wantErr error
	}{
		{"crypto/tls", hello, "db.example.com", nil},
		{"no server name", noSNI, "", nil},
		{"split over records", splitRecords(hello, 7), "db.example.com", nil},
		{"not TLS", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "", errNotTLS},
		{"truncated", hello[:len(hello)-3], "", errMalformed},
		{"empty record", []byte{recordHandshake, 3, 1, 0, 0}, "", errMalformed},
		{"not a ClientHello", []byte{recordHandshake, 3, 1, 0, 4, 2, 0, 0, 0}, "", errMalformed},
		{"too large", tooLarge, "", errTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, name, err := readHello(bytes.NewReader(c.in))
			if !errors.Is(err, c.wantErr) || name != c.want {
				t.Fatalf("readHello = %q, %v; want %q, %v", name, err, c.want, c.wantErr)
			}
			if err == nil && !bytes.Equal(raw, c.in) {
				t.Errorf("raw bytes differ from those read (%d of %d)", len(raw), len(c.in))
			}
		})
	}
}

// TestReadHelloStopsAtHello: nothing past the record that completes the
// ClientHello is read, so that it reaches the backend by the copy.
func TestReadHelloStopsAtHello(t *testing.T) {
	hello := clientHello(t, "a.example.com")
	r := bytes.NewReader(append(append([]byte{}, hello...), "after"...))
	if _, _, err := readHello(r); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != "after" {
		t.Errorf("left %q unread, want %q", rest, "after")
	}
}

// FuzzReadHello: any input ends in a name or an error, never a panic, a
// name is a lower-case DNS-ish string, and the bytes returned are a prefix
// of the input. Given in pieces, as reads on a relay loop bring them, the
// input says the same as read whole.
func FuzzReadHello(f *testing.F) {
	f.Add(clientHello(f, "db.example.com"))
	f.Add(clientHello(f, ""))
	f.Add(splitRecords(clientHello(f, "x.example.org"), 3))
	f.Add([]byte{recordHandshake, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		raw, name, err := readHello(bytes.NewReader(in))
		if !bytes.HasPrefix(in, raw) {
			t.Fatalf("returned bytes are not what was read")
		}
		if len(raw) > maxHelloBytes {
			t.Fatalf("read %d bytes", len(raw))
		}
		if err != nil && name != "" {
			t.Fatalf("a name with an error")
		}
		for _, ch := range []byte(name) {
			if 'A' <= ch && ch <= 'Z' || ch < '-' || ch > 'z' {
				t.Fatalf("name %q has %q", name, ch)
			}
		}
		need, pieceName, pieceErr := parsePieces(in)
		if need > 0 {
			// Input ended within the hello: readHello's EOF.
			if !errors.Is(err, io.EOF) && !errors.Is(err, errMalformed) {
				t.Fatalf("in pieces: more wanted; whole: %v", err)
			}
		} else if pieceName != name || !errors.Is(pieceErr, err) {
			t.Fatalf("in pieces: %q, %v; whole: %q, %v", pieceName, pieceErr, name, err)
		}
	})
}

// parsePieces gives in to a helloParser in pieces of a size its first
// byte chooses, until it has its answer or in ends.
func parsePieces(in []byte) (need int, serverName string, err error) {
	var p helloParser
	step := 1
	if len(in) > 0 {
		step += int(in[0]) % 64
	}
	for end := 0; ; {
		end = min(end+step, len(in))
		if need, serverName, err = p.parse(in[:end]); need == 0 || end == len(in) {
			return need, serverName, err
		}
	}
}
