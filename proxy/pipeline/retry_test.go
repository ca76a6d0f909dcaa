package pipeline

import (
	"testing"
	"time"
)

// TestBackoff checks the waits double from the base up to their cap, and
// stay within their jitter.
func TestBackoff(t *testing.T) {
	const base = 100 * time.Millisecond
	for n, most := range []time.Duration{base, 2 * base, 4 * base, 8 * base, 10 * base, 10 * base} {
		for range 100 {
			if d := backoff(base, n); d < most/2 || d > most {
				t.Fatalf("backoff(%v, %d) = %v, want %v to %v", base, n, d, most/2, most)
			}
		}
	}
	if d := backoff(0, 3); d != 0 {
		t.Errorf("backoff(0, 3) = %v, want 0", d)
	}
}
