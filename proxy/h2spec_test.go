package proxy

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// TestH2Spec runs h2spec (github.com/summerwind/h2spec) against an h2c and
// a TLS listener when HOSTGATE_H2SPEC names its binary, as hack/test.sh
// does; every case must pass.
func TestH2Spec(t *testing.T) {
	bin := os.Getenv("HOSTGATE_H2SPEC")
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must run h2spec: HOSTGATE_H2SPEC not set (hack/test.sh builds it)")
		}
		t.Skip("HOSTGATE_H2SPEC not set (hack/test.sh builds h2spec)")
	}
	backend := startBackend(t, echo("web"))
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
	f := newTLSFixture(t)
	routes := compile(t, route("all", nil, router.Rule{Backends: backends("web")}))
	addrs := apply(t, s,
		Listener{Address: freeAddr(t), Routes: routes},
		Listener{Address: freeAddr(t), Protocol: HTTPS, Routes: routes, TLS: f.store(t, "127.0.0.1!")})
	for i, name := range []string{"h2c", "h2"} {
		t.Run(name, func(t *testing.T) {
			_, port, _ := strings.Cut(addrs[i], ":")
			args := []string{"-h", "127.0.0.1", "-p", port, "-o", "2"}
			if name == "h2" {
				args = append(args, "-t", "-k")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
			t.Logf("h2spec %v:\n%s", args, out)
			if err != nil {
				t.Errorf("h2spec: %v", err)
			}
		})
	}
}
