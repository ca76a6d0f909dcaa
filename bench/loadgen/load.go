package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"time"
)

// call makes one request and says whether it succeeded.
type call func(context.Context) error

type result struct {
	requests, errors int
	elapsed          time.Duration
	latencies        []time.Duration // of successful requests
}

// run keeps streams requests in flight on each of conns connections for
// d and collects the latency of each. Requests still in flight at the end
// are cancelled and not counted, like wrk and h2load do.
func run(conns, streams int, d time.Duration, dial func() (call, func(), error)) (result, error) {
	calls := make([]call, conns)
	for i := range calls {
		do, closeConn, err := dial()
		if err != nil {
			return result{}, err
		}
		defer closeConn()
		calls[i] = do
	}
	deadline := time.Now().Add(d)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	// The measurement ends by the clock: the context's timer fires late on
	// a busy core, while calls already fail at the deadline (gRPC sends it
	// along and enforces it), and those failures are not the proxy's.
	over := func() bool { return ctx.Err() != nil || !time.Now().Before(deadline) }
	per := make([]result, conns*streams)
	var wg sync.WaitGroup
	var firstErr sync.Once // one example of what fails, not one per request
	start := time.Now()
	for w := range per {
		wg.Go(func() {
			r := &per[w]
			do := calls[w%conns]
			for !over() {
				t := time.Now()
				err := do(ctx)
				switch {
				case over():
				case err != nil:
					firstErr.Do(func() { fmt.Fprintln(os.Stderr, "loadgen:", err) })
					r.errors++
				default:
					r.requests++
					r.latencies = append(r.latencies, time.Since(t))
				}
			}
		})
	}
	wg.Wait()
	total := result{elapsed: time.Since(start)}
	for _, r := range per {
		total.requests += r.requests
		total.errors += r.errors
		total.latencies = append(total.latencies, r.latencies...)
	}
	slices.Sort(total.latencies)
	return total, nil
}

// percentile is the smallest latency that at least q of the (sorted)
// latencies do not exceed.
func (r result) percentile(q float64) time.Duration {
	n := len(r.latencies)
	if n == 0 {
		return 0
	}
	// The epsilon keeps 0.99×100 (99.00000000000001 in floating point)
	// at the 99th latency, not the 100th.
	i := int(math.Ceil(q*float64(n)-1e-9)) - 1
	return r.latencies[min(max(i, 0), n-1)]
}

func (r result) String() string {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return fmt.Sprintf("requests=%d errors=%d rps=%.1f p50_ms=%.3f p99_ms=%.3f",
		r.requests, r.errors, float64(r.requests)/r.elapsed.Seconds(), ms(r.percentile(0.50)), ms(r.percentile(0.99)))
}
