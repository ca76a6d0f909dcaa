package pipeline

import (
	"net/netip"
	"regexp"
	"testing"

	"github.com/hostgate/hostgate/proxy/guard"
)

func TestRealClient(t *testing.T) {
	trusted := guard.PrefixSet{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	conn := netip.MustParseAddr("10.0.0.2")
	for _, tt := range []struct {
		xff  []string
		want string
	}{
		{nil, "10.0.0.2"},
		{[]string{"203.0.113.7"}, "203.0.113.7"},
		{[]string{"198.51.100.1, 203.0.113.7, 10.0.0.9"}, "203.0.113.7"},
		{[]string{"198.51.100.1", "203.0.113.7,10.0.0.9 , "}, "203.0.113.7"},
		// Every hop trusted: the leftmost is the client.
		{[]string{"10.1.1.1, 10.0.0.9"}, "10.1.1.1"},
		// Not an address: the walk stops at the last one that was.
		{[]string{"203.0.113.7, unknown, 10.0.0.9"}, "10.0.0.9"},
		{[]string{"garbage"}, "10.0.0.2"},
		{[]string{"203.0.113.7:8080"}, "203.0.113.7"},
		{[]string{"[2001:db9::1]:443, 2001:db8::5"}, "2001:db9::1"},
		{[]string{"::ffff:203.0.113.7"}, "203.0.113.7"},
		{[]string{"2001:DB9::1"}, "2001:db9::1"},
		{[]string{"fe80::1%eth0"}, "10.0.0.2"},
	} {
		addr, text := realClient(trusted, conn, "10.0.0.2", tt.xff)
		if addr.String() != tt.want || text != tt.want {
			t.Errorf("X-Forwarded-For %q: client %v (%q), want %s", tt.xff, addr, text, tt.want)
		}
	}
}

func TestRealClientAllocations(t *testing.T) {
	trusted := guard.PrefixSet{netip.MustParsePrefix("10.0.0.0/8")}
	conn := netip.MustParseAddr("10.0.0.2")
	xff := []string{"198.51.100.1, 203.0.113.7, 10.0.0.9"}
	if n := testing.AllocsPerRun(100, func() { realClient(trusted, conn, "10.0.0.2", xff) }); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}

var requestIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestRequestIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 3 * idsPerBlock {
		id := newRequestID()
		if !requestIDPattern.MatchString(id) || seen[id] {
			t.Fatalf("request ID %q: want 32 hex digits, never repeated", id)
		}
		seen[id] = true
	}
	if n := testing.AllocsPerRun(10*idsPerBlock, func() { newRequestID() }); n > 0.1 {
		t.Errorf("%v allocations per ID, want next to none", n)
	}
}

func BenchmarkRequestID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		newRequestID()
	}
}
