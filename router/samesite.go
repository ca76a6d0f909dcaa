package router

import (
	"strconv"
	"strings"
)

// SameSiteFor is the SameSite attribute of a's cookie in the answer to a
// request with header h: none for a user agent that would reject
// SameSite=None, where ConditionalSameSiteNone says so.
func (a *Affinity) SameSiteFor(h Headers) string {
	if a.ConditionalSameSiteNone && a.SameSite == "None" {
		if ua, _ := headerValue(h, "User-Agent"); SameSiteNoneIncompatible(ua) {
			return ""
		}
	}
	return a.SameSite
}

// SameSiteNoneIncompatible reports whether the browser of userAgent
// rejects a cookie with SameSite=None or takes it for Strict: iOS and
// iPadOS 12, Safari and the embedded browsers of macOS 10.14, Chrome 40
// to 69 (ingress-nginx's same_site_none_compatible, which treats Chrome
// 40 to 50 and 67 to 69 as Chrome 51 to 66 are), and UC Browser before
// 12.13.2 (https://www.chromium.org/updates/same-site/incompatible-clients).
func SameSiteNoneIncompatible(userAgent string) bool {
	switch {
	case strings.Contains(userAgent, "Chrome/4"), strings.Contains(userAgent, "Chrome/5"), strings.Contains(userAgent, "Chrome/6"):
		return true
	case strings.Contains(userAgent, "CPU iPhone OS 12"), strings.Contains(userAgent, "iPad; CPU OS 12"):
		return true
	case strings.Contains(userAgent, "Macintosh") && strings.Contains(userAgent, "Intel Mac OS X 10_14") &&
		strings.Contains(userAgent, "Safari") && !strings.Contains(userAgent, "Chrome"):
		return true
	}
	return ucBrowserBefore12132(userAgent)
}

// ucBrowserBefore12132 reports whether userAgent is UC Browser older than
// 12.13.2; missing parts of its version count as 0.
func ucBrowserBefore12132(userAgent string) bool {
	_, version, ok := strings.Cut(userAgent, "UCBrowser/")
	if !ok {
		return false
	}
	var v [3]int
	for i := range v {
		end := strings.IndexFunc(version, func(r rune) bool { return r < '0' || r > '9' })
		if end < 0 {
			end = len(version)
		}
		n, err := strconv.Atoi(version[:end])
		if err != nil {
			return false
		}
		v[i] = n
		rest, more := strings.CutPrefix(version[end:], ".")
		if !more {
			break
		}
		version = rest
	}
	return v[0] < 12 || v[0] == 12 && (v[1] < 13 || v[1] == 13 && v[2] < 2)
}
