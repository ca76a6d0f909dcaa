//go:build linux

package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate/router"
)

// reuseServer serves every request on a cleartext listener of engine from
// backend, under the rule timeouts given, and returns the listener's
// address.
func reuseServer(t *testing.T, engine Engine, backend string, timeouts router.Timeouts) string {
	t.Helper()
	opts := testOptions()
	opts.HTTP1Engine = engine
	s := startServer(t, opts)
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
	rule := router.Rule{Backends: backends("web"), Timeouts: timeouts}
	return apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, route("all", nil, rule))})[0]
}

// TestStrayResponseBytesGoToNoOne: bytes a backend sends past the end of a
// response, here the body of a HEAD response that a backend writes anyway,
// are not the answer to the next request sent on its connection, another
// client's. The bytes make up a response of their own, as they may
// (response splitting), and come with the head or a moment after it.
func TestStrayResponseBytesGoToNoOne(t *testing.T) {
	const stray = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret"
	for _, engine := range []Engine{EngineNative, EngineLoop} {
		for _, later := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/later=%v", engine, later), func(t *testing.T) {
				backend := rawBackend(t, func(c net.Conn) {
					br := bufio.NewReader(c)
					for {
						r, err := http.ReadRequest(br)
						if err != nil {
							return
						}
						io.Copy(io.Discard, r.Body)
						if r.Method != http.MethodHead {
							io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nmine")
							continue
						}
						head := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(stray))
						if later {
							io.WriteString(c, head)
							time.Sleep(50 * time.Millisecond)
							io.WriteString(c, stray)
						} else {
							io.WriteString(c, head+stray)
						}
					}
				})
				addr := reuseServer(t, engine, backend, router.Timeouts{})
				a, abr := dialRaw(t, addr)
				io.WriteString(a, "HEAD /page HTTP/1.1\r\nHost: a\r\n\r\n")
				if resp, _ := readResp(t, abr, http.MethodHead); resp.StatusCode != http.StatusOK {
					t.Fatalf("HEAD: %d", resp.StatusCode)
				}
				// The stray bytes arrive, if they come later.
				time.Sleep(150 * time.Millisecond)
				b, bbr := dialRaw(t, addr)
				io.WriteString(b, "GET /mine HTTP/1.1\r\nHost: a\r\n\r\n")
				if resp, body := readResp(t, bbr, http.MethodGet); resp.StatusCode != http.StatusOK || body != "mine" {
					t.Errorf("the next client: %d %q, want 200 %q", resp.StatusCode, body, "mine")
				}
			})
		}
	}
}

// TestUploadAnsweredEarly: a backend that answers an upload before it read
// it (a refusal) has the connection's next request after the whole upload
// or on another connection. Sent after a part of it, the next request,
// another client's, made up the rest of the upload's body, and what
// followed it was taken for a request (request smuggling); on a
// connection whose write failed, it was not sent and failed at once.
func TestUploadAnsweredEarly(t *testing.T) {
	for _, engine := range []Engine{EngineNative, EngineLoop} {
		t.Run(string(engine), func(t *testing.T) {
			upload := strings.Repeat("u", 7000)
			first := make(chan net.Conn, 1)
			sent := make(chan struct{})
			stream := make(chan []byte, 1)
			var accepted atomic.Int32
			backend := smallWindowBackend(t, func(c net.Conn) {
				br := bufio.NewReader(c)
				if accepted.Add(1) > 1 {
					for {
						if _, err := http.ReadRequest(br); err != nil {
							return
						}
						io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
					}
				}
				if _, err := http.ReadRequest(br); err != nil {
					stream <- nil
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nwarm")
				first <- c
				<-sent
				// The upload's head is here; the answer does not wait for
				// its body, which is read only past the proxy's send
				// timeout.
				time.Sleep(100 * time.Millisecond)
				io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno")
				time.Sleep(600 * time.Millisecond)
				var all []byte
				buf := make([]byte, 64<<10)
				answered := false
				for {
					c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
					n, err := br.Read(buf)
					all = append(all, buf[:n]...)
					if !answered && bytes.Contains(all, []byte("GET /second")) && bytes.HasSuffix(all, []byte("\r\n\r\n")) {
						io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
						answered = true
					}
					if err != nil {
						break
					}
				}
				stream <- all
			})
			addr := reuseServer(t, engine, backend, router.Timeouts{BackendSend: 300 * time.Millisecond})
			c, br := dialRaw(t, addr)
			io.WriteString(c, "GET /warm HTTP/1.1\r\nHost: a\r\n\r\n")
			if resp, body := readResp(t, br, http.MethodGet); resp.StatusCode != http.StatusOK || body != "warm" {
				t.Fatalf("first request: %d %q", resp.StatusCode, body)
			}
			shrinkSendBuffer(t, <-first)
			fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n%s", len(upload), upload)
			close(sent)
			if resp, body := readResp(t, br, http.MethodPost); resp.StatusCode != http.StatusForbidden || body != "no" {
				t.Fatalf("upload: %d %q, want 403", resp.StatusCode, body)
			}
			io.WriteString(c, "GET /second HTTP/1.1\r\nHost: a\r\n\r\n")
			if resp, body := readResp(t, br, http.MethodGet); resp.StatusCode != http.StatusOK || body != "second" {
				t.Errorf("the request after the upload: %d %q, want 200 %q", resp.StatusCode, body, "second")
			}
			var all []byte
			select {
			case all = <-stream:
			case <-time.After(5 * time.Second):
				t.Fatal("the backend never finished reading")
			}
			end := bytes.Index(all, []byte("\r\n\r\n"))
			if end < 0 || !bytes.HasPrefix(all, []byte("POST /upload ")) {
				t.Fatalf("the backend got %.80q, want the upload", all)
			}
			body := all[end+4:]
			body = body[:min(len(body), len(upload))]
			if i := bytes.IndexFunc(body, func(r rune) bool { return r != 'u' }); i >= 0 {
				t.Errorf("the upload's body as the backend read it goes on, after %d of its bytes, with %.60q", i, body[i:])
			}
		})
	}
}

// smallWindowBackend is rawBackend on a socket whose connections take in
// as little as Linux allows before they are read, so that what the
// backend does not read stays with the proxy.
func smallWindowBackend(t *testing.T, serve func(net.Conn)) string {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 1) }); cerr != nil {
			return cerr
		}
		return err
	}}
	return rawBackendOn(t, lc, serve)
}

// shrinkSendBuffer gives the proxy's end of the backend connection c (the
// proxy runs in this process) the smallest send buffer Linux allows, so
// that a request the backend does not read leaves in part.
func shrinkSendBuffer(t *testing.T, c net.Conn) {
	t.Helper()
	local, remote := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		name, err := unix.Getsockname(fd)
		if sa, ok := name.(*unix.SockaddrInet4); err != nil || !ok || sa.Port != remote.Port {
			continue
		}
		peer, err := unix.Getpeername(fd)
		if sa, ok := peer.(*unix.SockaddrInet4); err != nil || !ok || sa.Port != local.Port {
			continue
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 1); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal(errors.New("the proxy's socket to the backend is not in this process"))
}
