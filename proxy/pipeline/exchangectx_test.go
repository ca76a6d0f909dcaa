package pipeline

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// engineContext stands for the HTTP/2 engine's stream context: done on a
// channel of its own, not its parent's, and followed through AfterFunc.
type engineContext struct {
	context.Context
	done chan struct{}
}

func (c *engineContext) Done() <-chan struct{} { return c.done }

func (c *engineContext) AfterFunc(f func()) func() bool {
	return context.AfterFunc(c.Context, f)
}

// TestExchangeContextTakesNoGoroutine: the contexts a request's exchange
// context is made into (the client's deadline, the transport's) follow a
// stream's context without a goroutine each, as those made from the
// stream's own do.
func TestExchangeContextTakesNoGoroutine(t *testing.T) {
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := &engineContext{Context: base, done: make(chan struct{})}
	const n = 100
	derive := func(ctx context.Context) int {
		before := runtime.NumGoroutine()
		var stops []context.CancelFunc
		for range n {
			_, stop := context.WithDeadline(ctx, time.Now().Add(time.Minute))
			stops = append(stops, stop)
		}
		after := runtime.NumGoroutine()
		for _, stop := range stops {
			stop()
		}
		return after - before
	}
	ex := &exchange{}
	ctx := withExchange(stream, ex)
	if got := exchangeOf(ctx); got != ex {
		t.Fatalf("exchangeOf = %p, want %p", got, ex)
	}
	// A goroutine per context would show as n more; other tests' goroutines
	// starting or ending meanwhile move either count by a few, so the bar
	// is half of n, not zero.
	if extra := derive(ctx) - derive(stream); extra >= n/2 {
		t.Errorf("%d contexts made from an exchange context took %d goroutines more than from the stream's", n, extra)
	}
}
