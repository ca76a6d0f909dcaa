package router

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
)

func TestAddressSet(t *testing.T) {
	s, err := ParseAddressSet(" 10.0.0.0/8,192.168.1.1, 10.1.0.0/16 ,2001:db8::/32,::ffff:172.16.0.0/108,fe80::1")
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"10.0.0.0": true, "10.255.255.255": true, "11.0.0.0": false, "9.255.255.255": false,
		"192.168.1.1": true, "192.168.1.2": false, "::ffff:10.2.3.4": true,
		"172.16.0.1": true, "172.31.255.255": true, "172.32.0.0": false,
		"2001:db8::1": true, "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff": true, "2001:db9::": false,
		"fe80::1": true, "fe80::2": false, "::": false,
	} {
		if got := s.Contains(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Contains(%s) = %t, want %t", addr, got, want)
		}
	}
	all, _ := ParseAddressSet("0.0.0.0/0,::/0")
	for _, a := range []string{"0.0.0.0", "255.255.255.255", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
		if !all.Contains(netip.MustParseAddr(a)) {
			t.Errorf("0.0.0.0/0,::/0 lacks %s", a)
		}
	}
	for _, bad := range []string{"", " , ", "10.0.0.0/33", "example.com", "10.0.0.1,nope", "fe80::1%eth0"} {
		if _, err := ParseAddressSet(bad); err == nil {
			t.Errorf("ParseAddressSet(%q) succeeded", bad)
		}
	}
	if _, err := ParseAddressSet("10.0.0.0/8,nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("error %v does not quote the bad entry", err)
	}
	data, err := json.Marshal(Access{Allow: s})
	if err != nil {
		t.Fatal(err)
	}
	var back Access
	if err := json.Unmarshal(data, &back); err != nil || back.Allow.String() != s.String() || !back.Allow.Contains(netip.MustParseAddr("10.9.9.9")) {
		t.Errorf("JSON round trip: %s → %v, %v", data, back.Allow, err)
	}
}

func FuzzParseAddressSet(f *testing.F) {
	f.Add("10.0.0.0/8,192.168.1.1", "10.1.2.3")
	f.Add("2001:db8::/32,::ffff:1.2.3.0/120", "1.2.3.4")
	f.Add("0.0.0.0/0,::/0", "::1")
	f.Fuzz(func(t *testing.T, list, addr string) {
		s, err := ParseAddressSet(list)
		a, aerr := netip.ParseAddr(addr)
		if err != nil || aerr != nil {
			return
		}
		// The merged ranges answer what the prefixes do.
		want := false
		for _, p := range s.prefixes {
			if p.Addr().Is4In6() {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			want = want || p.Contains(a.Unmap().WithZone(""))
		}
		if got := s.Contains(a); got != want {
			t.Fatalf("%q contains %s: %t, the prefixes say %t", list, addr, got, want)
		}
	})
}
