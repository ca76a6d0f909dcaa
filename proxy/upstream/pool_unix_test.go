//go:build unix

package upstream

import (
	"bufio"
	"io"
	"net"
	"syscall"
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

// TestFlushAwaitClosedWhileIdle pools a connection whose backend
// half-closes it while idle and keeps its socket open, as a host that
// went away leaves it: no reset comes to end a wait, so FlushAwait must
// find the close itself and fail at once, with nothing sent, for the
// request to go on a fresh connection.
func TestFlushAwaitClosedWhileIdle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			received <- -1
			return
		}
		defer c.Close()
		_ = c.(*net.TCPConn).CloseWrite()
		n, _ := io.Copy(io.Discard, c)
		received <- int(n)
	}()
	pool := NewPool(time.Second, 1, time.Minute)
	defer pool.Close()
	addr := ln.Addr().String()
	uc, _, err := pool.Get(addr, time.Time{}, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	pool.Put(addr, uc)
	time.Sleep(staleAfterIdle + 50*time.Millisecond)
	uc, reused, err := pool.Get(addr, time.Time{}, 0, false)
	if err != nil || !reused {
		t.Fatalf("Get: reused %v, %v; want the pooled connection", reused, err)
	}
	if err := uc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, _ = uc.Writer.WriteString("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	start := time.Now()
	err = uc.FlushAwait()
	if took := time.Since(start); err == nil || took > time.Second {
		t.Fatalf("FlushAwait on a connection the backend closed: %v after %v, want an error at once", err, took)
	}
	uc.Close()
	if n := <-received; n != 0 {
		t.Errorf("the backend got %d bytes of a request on a connection it had closed", n)
	}
}

// TestFlushAwaitSocketFull sends a request with FlushAwait while the
// socket's buffers are full, the backend reading only later: the write
// in the wait takes nothing (EAGAIN), and what it did not write goes as
// Write writes it, whole and after what was queued before.
func TestFlushAwaitSocketFull(t *testing.T) {
	const request = "GET /last HTTP/1.1\r\nHost: a\r\n\r\n"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	uc, _, err := NewPool(time.Second, 1, time.Minute).Get(ln.Addr().String(), time.Time{}, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	backend := <-accepted
	if backend == nil {
		t.Fatal("accept failed")
	}
	defer backend.Close()
	// Fill the sender's and the receiver's buffers, to the last byte.
	raw, err := uc.Conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	var queued int64
	_ = raw.Write(func(fd uintptr) bool {
		for size := len(chunk); size > 0; {
			n, err := syscall.Write(int(fd), chunk[:size])
			switch {
			case n > 0:
				queued += int64(n)
			case err == syscall.EAGAIN:
				size /= 2
			case err != nil:
				t.Error(err)
				return true
			}
		}
		return true
	})
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		b, _ := io.ReadAll(io.LimitReader(backend, queued+int64(len(request))))
		got <- b
	}()
	if err := uc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, _ = uc.Writer.WriteString(request)
	start := time.Now()
	if err := uc.FlushAwait(); err != nil {
		t.Fatalf("FlushAwait: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("FlushAwait took %v: it waited for an answer with the request unsent", took)
	}
	select {
	case b := <-got:
		if int64(len(b)) != queued+int64(len(request)) || string(b[queued:]) != request {
			t.Fatalf("backend got %d bytes ending %q, want %d ending %q", len(b), b[max(0, len(b)-len(request)):], queued+int64(len(request)), request)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not reach the backend")
	}
}
