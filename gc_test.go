package main

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const idle, busy = time.Minute, busyGCInterval / 2
	for _, tc := range []struct {
		live  uint64
		since time.Duration
		want  int
	}{
		{0, idle, gcPercent},                    // no collection yet
		{1 << 20, idle, maxGCPercent},           // tiny: the floor would be 40 times it
		{12 << 20, busy, maxGCPercent},          // HTTP/2 load: floor 233% above, capped
		{16 << 20, idle, 150},                   // grows to the floor exactly
		{20 << 20, idle, 100},                   //
		{24 << 20, idle, gcPercent},             // 75% above is past the floor already
		{heapFloor - 1, idle, gcPercent},        //
		{heapFloor / 3, idle, maxGCPercent},     // 200% above is the floor, to a byte
		{heapFloor, idle, gcPercent},            // 75% above is 30 MiB: less than the floor's room
		{heapFloor * 4 / 3, idle, gcPercent},    // 75% above is the floor's room exactly
		{90 << 20, idle, 44},                    // 10,000 routes, changes now and then: 40 MiB above
		{90 << 20, busy, gcPercent},             // 10,000 routes under load
		{160 << 20, idle, minGCPercent},         // 40 MiB above is 25%
		{1 << 40, idle, minGCPercent},           //
		{1 << 40, busyGCInterval, minGCPercent}, // a collection a second is not busy
	} {
		if got := gcPercentFor(tc.live, tc.since); got != tc.want {
			t.Errorf("gcPercentFor(%d MiB, %v since the last collection) = %d, want %d", tc.live>>20, tc.since, got, tc.want)
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
		// Below the floor the interval between collections does not count.
		if want := gcPercentFor(live, 0); percent == want && want != gcPercent {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d after collections that left %d bytes live, want %d", percent, live, gcPercentFor(live, 0))
		}
	}
}

// TestCgroupMemoryLimit reads the memory limit of a container as the
// kernel shows it: the cgroup named in /proc/self/cgroup under the
// cgroup root, or the root itself where the container sees only its own.
func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		self   string
		files  map[string]string // path under the root: content
		want   int64
		wantOK bool
	}{
		{"own cgroup namespace", "0::/\n", map[string]string{"memory.max": "536870912\n"}, 512 << 20, true},
		{"host's view", "0::/kubepods/pod1/c1\n", map[string]string{"kubepods/pod1/c1/memory.max": "268435456\n", "memory.max": "max\n"}, 256 << 20, true},
		{"path not visible", "0::/kubepods/pod1/c1\n", map[string]string{"memory.max": "268435456\n"}, 256 << 20, true},
		{"no limit", "0::/\n", map[string]string{"memory.max": "max\n"}, 0, false},
		{"cgroup v1", "12:memory:/kubepods/pod1\n", map[string]string{"memory/kubepods/pod1/memory.limit_in_bytes": "268435456\n"}, 256 << 20, true},
		{"cgroup v1, own namespace", "4:cpu,memory:/\n1:name=systemd:/\n", map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, 512 << 20, true},
		{"cgroup v1, no limit", "12:memory:/kubepods/pod1\n", map[string]string{"memory/kubepods/pod1/memory.limit_in_bytes": "9223372036854771712\n"}, 0, false},
		{"cgroup v1 without memory", "3:cpu:/x\n", map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, 0, false},
		{"hybrid: memory on v1", "12:memory:/x\n0::/y\n", map[string]string{"memory/x/memory.limit_in_bytes": "1048576"}, 1 << 20, true},
		{"v1 and v2", "12:memory:/x\n0::/y\n", map[string]string{"y/memory.max": "1048576", "memory/x/memory.limit_in_bytes": "2097152"}, 1 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tc.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, ok := cgroupMemoryLimit([]byte(tc.self), root)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("cgroupMemoryLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func FuzzCgroupFiles(f *testing.F) {
	f.Add([]byte("0::/kubepods/pod1/c1\n"), []byte("536870912\n"))
	f.Add([]byte("12:memory:/x\n0::/\n"), []byte("max\n"))
	f.Add([]byte("0::\n"), []byte("-1"))
	f.Fuzz(func(t *testing.T, self, memoryMax []byte) {
		for _, controller := range []string{"", "memory"} {
			if p, ok := cgroupPath(self, controller); ok && (p == "" || p[0] != '/') {
				t.Errorf("cgroupPath(%q, %q) = %q, not absolute", self, controller, p)
			}
		}
		if n, ok := parseMemoryMax(memoryMax); ok != (n > 0) {
			t.Errorf("parseMemoryMax(%q) = %d, %v", memoryMax, n, ok)
		}
	})
}

// TestTrimIfQuiet checks that a process that went quiet with much of its
// heap free gives that back to the system, and that one allocating fast
// enough to fill it soon keeps it.
func TestTrimIfQuiet(t *testing.T) {
	// The scavenger returns at once what lies far above the heap's goal:
	// the heap that stays free in hostgate is within it, below the
	// room the collector leaves a large live heap.
	live := megabytes(128)
	megabytes(64) // garbage at once
	runtime.GC()
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(samples)
	if free := samples[1].Value.Uint64(); free <= idleFreeMin {
		t.Fatalf("%d MiB of the heap free after 64 MiB became garbage, want more than %d", free>>20, idleFreeMin>>20)
	}
	// What is free would last this process one check.
	allocating := samples[1].Value.Uint64()
	if _, trimmed := trimIfQuiet(samples, samples[0].Value.Uint64()-allocating); trimmed {
		t.Errorf("trimmed the heap of a process that allocated %d MiB since the last check, with %d MiB free", allocating>>20, samples[1].Value.Uint64()>>20)
	}
	now, trimmed := trimIfQuiet(samples, samples[0].Value.Uint64())
	if !trimmed {
		t.Fatalf("kept %d MiB of free heap in a quiet process", samples[1].Value.Uint64()>>20)
	}
	metrics.Read(samples)
	if free := samples[1].Value.Uint64(); free > idleFreeMin {
		t.Errorf("%d MiB of the heap still free after trimming", free>>20)
	}
	if _, trimmed := trimIfQuiet(samples, now); trimmed {
		t.Errorf("trimmed again with %d MiB free", samples[1].Value.Uint64()>>20)
	}
	runtime.KeepAlive(live)
}

func megabytes(n int) [][]byte {
	b := make([][]byte, n)
	for i := range b {
		b[i] = make([]byte, 1<<20)
	}
	return b
}
