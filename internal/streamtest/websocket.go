package streamtest

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"

	"golang.org/x/net/http/httpguts"
)

// WebSocketEcho accepts WebSocket handshakes and echoes each frame back
// unmasked, prefixed with "echo: ".
var WebSocketEcho = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if !httpguts.HeaderValuesContainsToken(r.Header["Upgrade"], "websocket") {
		http.Error(w, "want a WebSocket", http.StatusBadRequest)
		return
	}
	sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", base64.StdEncoding.EncodeToString(sum[:]))
	rw.Flush()
	for {
		msg, err := ReadFrame(rw.Reader)
		if err != nil {
			return
		}
		if _, err := conn.Write(Frame("echo: "+msg, false)); err != nil {
			return
		}
	}
})

// Frame encodes a short text frame, masked as clients must.
func Frame(msg string, masked bool) []byte {
	b := []byte{0x81, byte(len(msg))}
	if !masked {
		return append(b, msg...)
	}
	b[1] |= 0x80
	mask := []byte{1, 2, 3, 4}
	b = append(b, mask...)
	for i := range len(msg) {
		b = append(b, msg[i]^mask[i%4])
	}
	return b
}

// ReadFrame decodes a short frame, masked or not.
func ReadFrame(r *bufio.Reader) (string, error) {
	var head [2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return "", err
	}
	n, masked := int(head[1]&0x7f), head[1]&0x80 != 0
	var mask [4]byte
	if masked {
		if _, err := io.ReadFull(r, mask[:]); err != nil {
			return "", err
		}
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return "", err
	}
	if masked {
		for i := range payload {
			payload[i] ^= mask[i%4]
		}
	}
	return string(payload), nil
}

// Handshake opens a WebSocket on conn with a GET of path for host and
// returns the reader to read frames from: the response may arrive with the
// first frames in the same read.
func Handshake(conn net.Conn, host, path string) (*bufio.Reader, error) {
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path, host)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, fmt.Errorf("WebSocket handshake: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		return nil, fmt.Errorf("WebSocket handshake: %s %v", resp.Status, resp.Header)
	}
	return br, nil
}
