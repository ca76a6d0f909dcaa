package pipeline

import (
	"regexp"
	"testing"

	"github.com/hostgate/hostgate/router"
)

// TestExpandCaptures: what nginx's rewrite makes of a template of
// captures, for the cases TestRewriteQueryOnEngines does not send through
// every engine.
func TestExpandCaptures(t *testing.T) {
	pattern := regexp.MustCompile(`^(?:(?i)/s/([^/]*)(/.*)?)$`)
	tests := []struct {
		template, path, query string
		wantPath, wantQuery   string
		replacesQuery         bool
	}{
		// No '?': the client's query stays (rewritesQuery false).
		{"/x/$1", "/s/a", "k=v", "/x/a", "", false},
		// A capture may hold the leading "/", and one that took no
		// part in the match is empty.
		{"$2?a=$1", "/s/a", "", "/", "a=a", true},
		{"/x?", "/s/a", "k=v", "/x", "", true},
		// What follows the first '?' is the query, '?' and all.
		{"/x?a=$1?b", "/s/a", "k=v", "/x", "a=a?b&k=v", true},
		{"/x?a=$1&b?", "/s/a", "k=v", "/x", "a=a&b", true},
		// A template's query that comes out empty still takes the
		// client's after "&", as nginx's does.
		{"/x?$2", "/s/a", "k=v", "/x", "&k=v", true},
		// Captures of a path with a '%': decoded, then escaped as
		// nginx escapes arguments (upper-case hex, "%" "&" "+" ";" "?"
		// " " "#" and bytes out of ASCII); other escapes come out
		// decoded, as nginx sends them.
		{"/x?q=$1", "/s/%41%3b%3F%25%C3%A9%20%2F", "", "/x", "q=A%3B%3F%25%C3%A9%20/", true},
		// A lone '%' is no escape: it is escaped itself.
		{"/x?q=$1", "/s/a%4", "", "/x", "q=a%254", true},
		// In the path, captures are copied as they are.
		{"/$1/y?q=1", "/s/a%2Bb", "", "/a%2Bb/y", "q=1", true},
	}
	for _, tt := range tests {
		path, query, rewritesQuery := expandCaptures(tt.template, &router.Request{Path: tt.path, RawQuery: tt.query}, pattern)
		if path != tt.wantPath || query != tt.wantQuery || rewritesQuery != tt.replacesQuery {
			t.Errorf("%q of %s?%s = %q, %q, query replaced %t; want %q, %q, %t", tt.template, tt.path, tt.query, path, query, rewritesQuery, tt.wantPath, tt.wantQuery, tt.replacesQuery)
		}
	}
}
