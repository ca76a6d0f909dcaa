//go:build linux

package h1loop

import (
	"net"
	"testing"
	"time"
)

// FuzzLoop feeds the loop byte streams cut into pieces at the points the
// fuzzer chooses, each piece a write of its own: whatever comes, the
// loop neither panics nor keeps the connection once the client is done.
func FuzzLoop(f *testing.F) {
	for _, seed := range []string{
		"GET / HTTP/1.1\r\nHost: moved.test\r\n\r\nGET /x HTTP/1.1\r\nHost: nowhere.test\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /a HTTP/1.1\r\nHost: app.test\r\n\r\nGET /b HTTP/1.0\r\nHost: app.test\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
		"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.1\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
	} {
		f.Add([]byte(seed), []byte{5, 17, 3})
	}
	st := serveStack(f, echoBackend(f), stackOpts{readHeaderTimeout: time.Second, idleTimeout: time.Second})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		c, err := net.Dial("tcp", st.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		for _, cut := range cuts {
			n := min(int(cut), len(stream))
			if _, err := c.Write(stream[:n]); err != nil {
				return // closed on a refusal
			}
			stream = stream[n:]
		}
		c.Write(stream)
		c.(*net.TCPConn).CloseWrite()
		// The server ends the connection, at the latest when its
		// timeouts pass.
		var b [1]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("connection still open after the client finished")
				}
				return
			}
		}
	})
}
