package h2

import (
	"context"
	"slices"
	"sync"
	"time"
)

// streamCtx is a stream's context: done when the stream ends or is reset,
// or when its connection's context is (conn.cancelStreams). It is part of
// the stream, where context.WithCancel took two allocations per stream and
// added each stream to the connection's context, and took it off again,
// under that context's lock. Its Done channel is made only for those who
// ask for one; AfterFunc serves context.AfterFunc and the contexts made
// from it, which then need no goroutine waiting on Done.
type streamCtx struct {
	parent context.Context

	mu     sync.Mutex
	err    error
	done   chan struct{}
	afters []afterFunc
	// lastAfter numbers the functions AfterFunc was given, for their
	// stop.
	lastAfter uint64
}

type afterFunc struct {
	id uint64
	f  func()
}

// closedDone is the Done of every stream context that ended before anyone
// asked for it.
var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (x *streamCtx) Deadline() (time.Time, bool) { return x.parent.Deadline() }

func (x *streamCtx) Value(key any) any { return x.parent.Value(key) }

func (x *streamCtx) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

func (x *streamCtx) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done == nil {
		if x.err != nil {
			x.done = closedDone
		} else {
			x.done = make(chan struct{})
		}
	}
	return x.done
}

// AfterFunc is what context.AfterFunc and the contexts derived from x
// call: f runs in a goroutine of its own once x is done, unless stop is
// called first.
func (x *streamCtx) AfterFunc(f func()) (stop func() bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err != nil {
		go f()
		return func() bool { return false }
	}
	x.lastAfter++
	id := x.lastAfter
	x.afters = append(x.afters, afterFunc{id, f})
	return func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		i := slices.IndexFunc(x.afters, func(a afterFunc) bool { return a.id == id })
		if i < 0 {
			return false
		}
		x.afters = slices.Delete(x.afters, i, i+1)
		return true
	}
}

// cancel ends x with err, the first time it is called.
func (x *streamCtx) cancel(err error) {
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		return
	}
	x.err = err
	if x.done == nil {
		x.done = closedDone
	} else {
		close(x.done)
	}
	afters := x.afters
	x.afters = nil
	x.mu.Unlock()
	for _, a := range afters {
		go a.f()
	}
}

func (x *streamCtx) String() string { return "h2 stream context" }
