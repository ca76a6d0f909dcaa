package watch

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestSteadyEventsDoNotDelayTranslation feeds a Source an event every
// millisecond, as status writes for thousands of routes do, and expects
// translations all along: the debounce must not wait for a pause.
func TestSteadyEventsDoNotDelayTranslation(t *testing.T) {
	published := make(chan time.Time, 100)
	s, err := newSource(Options{}, func(*Snapshot, *Reports) {
		select {
		case published <- time.Now():
		default:
		}
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s.list = func() *objects { return benchObjects(10) }
	s.run = func(ctx context.Context, changed func()) error {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				changed()
			}
		}
	}
	runSource(t)(s, nil)
	start := time.Now()
	for i := range 3 {
		select {
		case <-published:
		case <-time.After(5 * time.Second):
			t.Fatalf("translation %d not published %v into a steady stream of events", i+1, time.Since(start))
		}
	}
}
