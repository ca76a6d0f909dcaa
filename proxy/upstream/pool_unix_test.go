//go:build unix

package upstream

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// TestFlushAwait sends a request with FlushAwait to a backend that answers
// after a pause: the backend gets the request whole, and FlushAwait
// returns with the answer there to read, also when the connection's read
// deadline has passed and there is nothing to wait with.
func TestFlushAwait(t *testing.T) {
	const request = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	const answer = "HTTP/1.1 204 No Content\r\n\r\n"
	for _, tc := range []struct {
		name     string
		deadline time.Time
	}{
		{"waits for the answer", time.Time{}},
		{"read deadline passed", time.Unix(1, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			got := make(chan string, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					got <- err.Error()
					return
				}
				defer c.Close()
				buf := make([]byte, len(request))
				_, err = io.ReadFull(c, buf)
				got <- string(buf)
				if err == nil {
					time.Sleep(50 * time.Millisecond)
					_, _ = io.WriteString(c, answer)
				}
				_, _ = io.Copy(io.Discard, c)
			}()
			uc, _, err := NewPool(time.Second, 1, time.Minute).Get(ln.Addr().String(), time.Time{}, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			defer uc.Close()
			if err := uc.SetReadDeadline(tc.deadline); err != nil {
				t.Fatal(err)
			}
			_, _ = uc.Writer.WriteString(request)
			if err := uc.FlushAwait(); err != nil {
				t.Fatalf("FlushAwait: %v", err)
			}
			select {
			case r := <-got:
				if r != request {
					t.Fatalf("backend got %q, want %q", r, request)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the request did not reach the backend")
			}
			if !tc.deadline.IsZero() {
				return
			}
			// The answer is there: a read finds it without waiting.
			_ = uc.SetReadDeadline(time.Now().Add(time.Millisecond))
			head, err := bufio.NewReader(uc.Conn).Peek(len(answer))
			if err != nil || string(head) != answer {
				t.Fatalf("after FlushAwait, read %q (%v), want %q at once", head, err, answer)
			}
		})
	}
}
