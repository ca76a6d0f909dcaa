package watch

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReadmeAnnotationTable keeps README's table of ingress-nginx
// annotations true: every annotation hostgate knows is in it once, with
// what the code does with it.
func TestReadmeAnnotationTable(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "<!-- ingress-nginx annotations")
	end := strings.Index(text, "<!-- end of ingress-nginx annotations -->")
	if start < 0 || end < start {
		t.Fatal("README.md has no table of ingress-nginx annotations between its markers")
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\| ([a-z ]+) \\|")
	inTable := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(text[start:end], -1) {
		if _, dup := inTable[m[1]]; dup {
			t.Errorf("README lists %s twice", m[1])
		}
		inTable[m[1]] = m[2]
	}
	want := map[string]string{}
	for _, group := range nginxHonoured {
		for name := range group {
			want[name] = "honoured"
		}
	}
	for name := range nginxRefused {
		want[name] = "refused"
	}
	for name := range nginxNotApplicable {
		want[name] = "ignored"
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if inTable[name] != want[name] {
			t.Errorf("README says %s is %q; the code: %q", name, inTable[name], want[name])
		}
	}
	for name := range inTable {
		if _, ok := want[name]; !ok {
			t.Errorf("README lists %s, which the code does not know", name)
		}
	}
}
