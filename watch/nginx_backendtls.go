package watch

// ingress-nginx's proxy-ssl-protocols and proxy-ssl-ciphers: the TLS
// versions and cipher suites offered to HTTPS and GRPCS backends, read
// into crypto/tls's terms (router.BackendTLS MinVersion, MaxVersion and
// CipherSuites).
//
// Go's TLS is not OpenSSL's: it has no finite-field DHE, CAMELLIA, ARIA
// or PSK suites, and it chooses TLS 1.3's suites itself (as nginx's
// proxy_ssl_ciphers does not set them either). A cipher string is read as
// suite names, OpenSSL's or IANA's, with HIGH (every suite Go counts as
// secure), DEFAULT (Go's own choice) and exclusions that cannot matter;
// any other name or keyword makes the annotation invalid, naming it,
// rather than offer something else than was asked.

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
)

// nginxTLSVersions are the protocols proxy-ssl-protocols may name:
// ingress-nginx's validation takes these two only.
var nginxTLSVersions = map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}

// parseTLSProtocols reads proxy-ssl-protocols ("TLSv1.2 TLSv1.3") into
// the lowest and highest version offered.
func parseTLSProtocols(v string) (lo, hi uint16, err error) {
	for _, name := range strings.Fields(v) {
		version, ok := nginxTLSVersions[name]
		if !ok {
			return 0, 0, fmt.Errorf("%q: must be TLSv1.2 or TLSv1.3 (ingress-nginx accepts no others)", name)
		}
		if lo == 0 || version < lo {
			lo = version
		}
		hi = max(hi, version)
	}
	if lo == 0 {
		return 0, 0, fmt.Errorf("must name TLSv1.2, TLSv1.3 or both")
	}
	return lo, hi, nil
}

// openSSLSuites maps OpenSSL's names of the TLS 1.2 suites Go implements
// to Go's (IANA's) names.
var openSSLSuites = map[string]string{
	"ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-RSA-AES128-GCM-SHA256":   "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-RSA-AES256-GCM-SHA384":   "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-RSA-CHACHA20-POLY1305":   "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-ECDSA-AES128-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
	"ECDHE-RSA-AES128-SHA":          "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
	"ECDHE-ECDSA-AES256-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
	"ECDHE-RSA-AES256-SHA":          "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
	"ECDHE-ECDSA-AES128-SHA256":     "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
	"ECDHE-RSA-AES128-SHA256":       "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
	"AES128-GCM-SHA256":             "TLS_RSA_WITH_AES_128_GCM_SHA256",
	"AES256-GCM-SHA384":             "TLS_RSA_WITH_AES_256_GCM_SHA384",
	"AES128-SHA":                    "TLS_RSA_WITH_AES_128_CBC_SHA",
	"AES256-SHA":                    "TLS_RSA_WITH_AES_256_CBC_SHA",
	"AES128-SHA256":                 "TLS_RSA_WITH_AES_128_CBC_SHA256",
	"DES-CBC3-SHA":                  "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
	"ECDHE-RSA-DES-CBC3-SHA":        "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
	"RC4-SHA":                       "TLS_RSA_WITH_RC4_128_SHA",
	"ECDHE-RSA-RC4-SHA":             "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
	"ECDHE-ECDSA-RC4-SHA":           "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
}

// harmlessExclusions are what "!" or "-" may take out of a cipher string
// with no effect here: no suite Go has is of these kinds.
var harmlessExclusions = []string{
	"aNULL", "eNULL", "NULL", "EXPORT", "EXP", "LOW", "MD5", "DSS", "aDSS", "PSK", "SRP", "CAMELLIA", "SEED",
	"IDEA", "RC2", "ADH", "AECDH", "DH", "DHE", "EDH", "kDHE", "kEDH", "ARIA", "SSLv2", "aECDH", "kECDH", "DES",
}

// weakKinds are exclusions that take Go's suites of that kind out.
var weakKinds = map[string]string{"RC4": "_RC4_", "3DES": "_3DES_"}

// cipherSuites are the outcome of proxy-ssl-ciphers: the suites offered
// (nil: Go's choice), and what the outcome's reason should say.
type cipherSuites struct {
	ids  []uint16
	note string
}

// parseCipherSuites reads proxy-ssl-ciphers.
func parseCipherSuites(v string) (cipherSuites, error) {
	byName := map[string]*tls.CipherSuite{}
	for _, c := range slices.Concat(tls.CipherSuites(), tls.InsecureCipherSuites()) {
		byName[c.Name] = c
	}
	var ids []uint16
	var tls13, weak, unknown, excluded []string
	defaulted := false
	for _, item := range strings.FieldsFunc(v, func(r rune) bool { return r == ':' || r == ',' || r == ' ' }) {
		name := item
		if n, ok := openSSLSuites[item]; ok {
			name = n
		}
		c := byName[name]
		switch {
		case c != nil && slices.Contains(c.SupportedVersions, tls.VersionTLS13):
			tls13 = append(tls13, item)
		case c != nil:
			ids = append(ids, c.ID)
			if c.Insecure {
				weak = append(weak, item)
			}
		case item == "HIGH":
			for _, c := range tls.CipherSuites() {
				if !slices.Contains(c.SupportedVersions, tls.VersionTLS13) {
					ids = append(ids, c.ID)
				}
			}
		case item == "DEFAULT":
			defaulted = true
		case (item[0] == '!' || item[0] == '-') && slices.Contains(harmlessExclusions, item[1:]):
		case (item[0] == '!' || item[0] == '-') && weakKinds[item[1:]] != "":
			excluded = append(excluded, weakKinds[item[1:]])
		default:
			unknown = append(unknown, item)
		}
	}
	if len(unknown) > 0 {
		var secure []string
		for openSSL, name := range openSSLSuites {
			if c := byName[name]; !c.Insecure {
				secure = append(secure, openSSL)
			}
		}
		slices.Sort(secure)
		return cipherSuites{}, fmt.Errorf("%s: not a TLS 1.2 cipher suite Go implements, or a keyword hostgate reads (HIGH, DEFAULT, and exclusions of kinds Go lacks such as !aNULL or !MD5); Go's secure suites are %s",
			strings.Join(unknown, ", "), strings.Join(secure, ":"))
	}
	ids = slices.DeleteFunc(ids, func(id uint16) bool {
		return slices.ContainsFunc(excluded, func(kind string) bool { return strings.Contains(tls.CipherSuiteName(id), kind) })
	})
	// The first mention of a suite gives its place, as in OpenSSL.
	var out []uint16
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	var notes []string
	switch {
	case defaulted && len(out) > 0:
		return cipherSuites{}, fmt.Errorf("DEFAULT stands alone: Go's own choice, or the suites listed, not both")
	case len(out) == 0 && !defaulted && len(tls13) == 0:
		return cipherSuites{}, fmt.Errorf("leaves no cipher suite")
	case len(out) == 0:
		notes = append(notes, "Go's own choice of suites")
	}
	notes = append(notes, "TLS 1.2 suites: Go chooses TLS 1.3's itself, which no configuration changes")
	if len(tls13) > 0 {
		notes = append(notes, "listing "+strings.Join(tls13, ", ")+" changes nothing")
	}
	if len(weak) > 0 {
		notes = append(notes, "Go counts "+strings.Join(weak, ", ")+" as insecure")
	}
	return cipherSuites{ids: out, note: strings.Join(notes, "; ")}, nil
}
