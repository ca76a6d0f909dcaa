package router

import "regexp"

// Request is what Lookup needs of an HTTP request. Host may carry a port and
// any case; Path is the request path as sent (not decoded); RawQuery is the
// query string without "?".
type Request struct {
	Host     string
	Method   string
	Path     string
	RawQuery string
	Header   Headers
}

// Headers gives the values of a request header, nil when it is absent. Names
// are passed in canonical MIME form (as textproto.CanonicalMIMEHeaderKey
// returns them), so net/http's Header satisfies it without allocating. Only
// the first value takes part in matching.
type Headers interface {
	Values(name string) []string
}

// Target is the outcome of a Lookup: the rule that won and which of its
// matches selected it. It points into the Table and must not be modified.
type Target struct {
	Route     *Route
	Rule      *Rule
	RuleIndex int
	// Match is the match that won, or nil for a rule without matches;
	// MatchIndex is its index in Rule.Matches, -1 when nil.
	Match      *Match
	MatchIndex int
	// Pattern is the compiled expression of a PathRegularExpression
	// match, whole-path anchored, for ReplaceRegexCaptures; nil otherwise.
	Pattern *regexp.Regexp
}
