package main

import (
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, gcPercent},                // no collection yet
		{1 << 20, maxGCPercent},       // tiny: the floor would be 40 times it
		{12 << 20, maxGCPercent},      // HTTP/2 load: floor 233% above, capped
		{16 << 20, 150},               // grows to the floor exactly
		{20 << 20, 100},               //
		{24 << 20, gcPercent},         // 75% above is past the floor already
		{heapFloor, gcPercent},        //
		{80 << 20, gcPercent},         // 10,000 routes
		{1 << 40, gcPercent},          //
		{heapFloor - 1, gcPercent},    //
		{heapFloor / 3, maxGCPercent}, // 200% above is the floor, to a byte
	} {
		if got := gcPercentFor(tc.live); got != tc.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}

// TestPaceGC checks that the percent follows each collection: with the
// small heap of a test binary, the collector is told to let it grow to
// the floor.
func TestPaceGC(t *testing.T) {
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	paceGC()
	samples := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/heap/live:bytes"}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the cleanup runs after the collection
		metrics.Read(samples)
		percent, live := int(samples[0].Value.Uint64()), samples[1].Value.Uint64()
		if want := gcPercentFor(live); percent == want && want != gcPercent {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d after collections that left %d bytes live, want %d", percent, live, gcPercentFor(live))
		}
	}
}
