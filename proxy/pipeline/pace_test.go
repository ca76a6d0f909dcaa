package pipeline

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// TestPacer feeds bodies through a pipe at several rates: one that keeps
// up is read whole, one that trickles after the grace period or stalls is
// cut with errBodyTooSlow soon after it falls behind, and one past the
// limit with errBodyTooLong, a read in progress woken each time.
func TestPacer(t *testing.T) {
	tests := []struct {
		name   string
		limits paceLimits
		// pieces of one byte each are written every interval, count
		// times, then the writer waits for the cut.
		interval time.Duration
		count    int
		want     error
		// within bounds how long after the start the cut comes.
		within time.Duration
	}{
		{"keeps pace", paceLimits{minRate: 20, grace: 100 * time.Millisecond}, 2 * time.Millisecond, 150, nil, 0},
		{"trickles", paceLimits{minRate: 1000, grace: 100 * time.Millisecond}, 20 * time.Millisecond, 1000, errBodyTooSlow, time.Second},
		{"stalls", paceLimits{minRate: 1000, grace: 100 * time.Millisecond}, 0, 0, errBodyTooSlow, time.Second},
		{"too long", paceLimits{limit: 200 * time.Millisecond}, 10 * time.Millisecond, 1000, errBodyTooLong, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			p := startPacer(tt.limits, pr, func() { pr.CloseWithError(os.ErrDeadlineExceeded) })
			go func() {
				for range tt.count {
					if _, err := pw.Write([]byte{'x'}); err != nil {
						return
					}
					time.Sleep(tt.interval)
				}
				if tt.want == nil {
					pw.Close()
				}
			}()
			start := time.Now()
			n, err := io.Copy(io.Discard, p)
			took := time.Since(start)
			finished := p.finish()
			if !errors.Is(err, tt.want) || !errors.Is(finished, tt.want) {
				t.Fatalf("read %d bytes, error %v, finish %v; want %v", n, err, finished, tt.want)
			}
			if tt.want == nil && n != int64(tt.count) {
				t.Errorf("read %d bytes of %d", n, tt.count)
			}
			if tt.within > 0 && took > tt.within {
				t.Errorf("cut after %v; want within %v", took, tt.within)
			}
		})
	}
}

// TestPacerFinishedWakesNothing: a check that comes after the transfer
// ended must not wake the connection, which has moved on.
func TestPacerFinishedWakesNothing(t *testing.T) {
	woke := make(chan struct{}, 1)
	p := startPacer(paceLimits{minRate: 1 << 20, grace: time.Millisecond}, io.LimitReader(nil, 0), func() { woke <- struct{}{} })
	if err := p.finish(); err != nil {
		t.Fatal(err)
	}
	p.check()
	time.Sleep(20 * time.Millisecond)
	select {
	case <-woke:
		t.Error("a finished transfer's check woke the connection")
	default:
	}
}
