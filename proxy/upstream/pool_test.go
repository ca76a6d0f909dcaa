package upstream

import (
	"io"
	"net"
	"testing"
	"time"
)

type stayingClient struct{}

func (stayingClient) ClientGone() bool { return false }

// TestCheckOutlivesExchange has a watched exchange leave its client check
// armed as the connection goes back to the pool (armCheck keeps it, to
// change no timer per request): the next exchange, which watches nothing,
// waits past that check for its answer rather than timing out, and one
// that watches again keeps the check it finds.
func TestCheckOutlivesExchange(t *testing.T) {
	asked := make(chan struct{})
	addr := echoBackend(t, func(i int) {
		if i == 1 {
			// The second answer comes after the first exchange's check
			// has passed.
			close(asked)
			time.Sleep(clientCheckInterval + 200*time.Millisecond)
		}
	})
	p := NewPool(time.Second, 1, time.Minute)
	defer p.Close()
	exchange := func(watch bool) error { return echoExchange(p, addr, watch) }
	if err := exchange(true); err != nil {
		t.Fatalf("watched exchange: %v", err)
	}
	uc, _, err := p.Get(addr, time.Time{}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if uc.checkAt.IsZero() || uc.fixed {
		t.Fatalf("pooled connection: check at %v, other deadlines %v; want the check alone kept", uc.checkAt, uc.fixed)
	}
	p.Put(addr, uc)
	if err := exchange(false); err != nil {
		t.Fatalf("unwatched exchange after the check passed: %v", err)
	}
	<-asked
	uc, _, err = p.Get(addr, time.Time{}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	if !uc.checkAt.IsZero() {
		t.Fatalf("check at %v after the read that found it passed; want none", uc.checkAt)
	}
	uc.WatchClient(stayingClient{}, time.Time{})
	first := uc.checkAt
	uc.WatchClient(stayingClient{}, time.Time{})
	if first.IsZero() || uc.checkAt != first {
		t.Fatalf("check at %v, then %v; want the first kept", first, uc.checkAt)
	}
}

// TestStaleAfterCheckPassed: a watched exchange leaves its client check
// armed in the pool; once it passed, Stale() (a peek with the socket's
// read deadline gone by) must still find the healthy, idle connection
// open, not closed.
func TestStaleAfterCheckPassed(t *testing.T) {
	addr := echoBackend(t, nil)
	p := NewPool(time.Second, 1, time.Minute)
	defer p.Close()
	if err := echoExchange(p, addr, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(clientCheckInterval + 100*time.Millisecond)
	uc, reused, err := p.Get(addr, time.Time{}, 0, false)
	if err != nil || !reused {
		t.Fatal(err, reused)
	}
	defer uc.Close()
	if uc.Stale() {
		t.Fatalf("healthy pooled connection reported stale (SocketState %v) once the kept client check passed", SocketState(uc.Conn))
	}
}

// echoBackend listens on loopback for one connection and answers each
// byte it reads with the same byte, after before(i) for the i-th (nil:
// at once). It returns its address.
func echoBackend(t *testing.T, before func(i int)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 1)
		for i := 0; ; i++ {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if before != nil {
				before(i)
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String()
}

// echoExchange sends a byte to the echoBackend at addr on a connection of
// p, watching a client that stays when watch is set, reads the answer and
// puts the connection back.
func echoExchange(p *Pool, addr string, watch bool) error {
	uc, _, err := p.Get(addr, time.Time{}, 0, false)
	if err != nil {
		return err
	}
	if watch {
		uc.WatchClient(stayingClient{}, time.Time{})
	}
	if _, err := uc.Write([]byte{'x'}); err != nil {
		return err
	}
	if _, err := uc.Reader.ReadByte(); err != nil {
		return err
	}
	p.Put(addr, uc)
	return nil
}
