package watch

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"
)

// tlsOffer is a case of TestNginxTLSOffer: the annotations, the outcome
// of the one named, the backends' TLS offer (versions and suites), and
// what the outcome's reason says.
type tlsOffer struct {
	annotations map[string]string
	name        string
	want        Outcome
	min, max    uint16
	suites      []uint16
	reason      string
}

// TestNginxTLSOffer reads proxy-ssl-protocols and proxy-ssl-ciphers,
// good and bad, on an Ingress with backend-protocol HTTPS, and says why
// they are ignored without it.
func TestNginxTLSOffer(t *testing.T) {
	for _, tc := range []tlsOffer{
		{map[string]string{"proxy-ssl-protocols": "TLSv1.2 TLSv1.3"}, "proxy-ssl-protocols", Honoured, tls.VersionTLS12, tls.VersionTLS13, nil, ""},
		{map[string]string{"proxy-ssl-protocols": " TLSv1.3 "}, "proxy-ssl-protocols", Honoured, tls.VersionTLS13, tls.VersionTLS13, nil, ""},
		{map[string]string{"proxy-ssl-protocols": "TLSv1.1 TLSv1.2"}, "proxy-ssl-protocols", Invalid, 0, 0, nil, "TLSv1.1"},
		{map[string]string{"proxy-ssl-protocols": "SSLv3"}, "proxy-ssl-protocols", Invalid, 0, 0, nil, "SSLv3"},
		{map[string]string{"proxy-ssl-protocols": ""}, "proxy-ssl-protocols", Invalid, 0, 0, nil, ""},
		{map[string]string{"proxy-ssl-ciphers": "ECDHE-RSA-AES128-GCM-SHA256:TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,ECDHE-RSA-AES128-GCM-SHA256"}, "proxy-ssl-ciphers", Honoured, 0, 0,
			[]uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, "TLS 1.3's itself"},
		{map[string]string{"proxy-ssl-ciphers": "HIGH:!aNULL:!MD5"}, "proxy-ssl-ciphers", Honoured, 0, 0, secureTLS12(), ""},
		{map[string]string{"proxy-ssl-ciphers": "DEFAULT"}, "proxy-ssl-ciphers", Honoured, 0, 0, nil, "Go's own choice"},
		{map[string]string{"proxy-ssl-ciphers": "AES128-SHA:DES-CBC3-SHA:!3DES"}, "proxy-ssl-ciphers", Honoured, 0, 0, []uint16{tls.TLS_RSA_WITH_AES_128_CBC_SHA}, "insecure"},
		{map[string]string{"proxy-ssl-ciphers": "TLS_AES_128_GCM_SHA256:ECDHE-RSA-AES128-SHA"}, "proxy-ssl-ciphers", Honoured, 0, 0, []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA}, "TLS_AES_128_GCM_SHA256 changes nothing"},
		{map[string]string{"proxy-ssl-ciphers": "ECDHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES128-GCM-SHA256:CAMELLIA256-SHA"}, "proxy-ssl-ciphers", Invalid, 0, 0, nil, "DHE-RSA-AES128-GCM-SHA256, CAMELLIA256-SHA: not a TLS 1.2 cipher suite Go implements"},
		{map[string]string{"proxy-ssl-ciphers": "MEDIUM"}, "proxy-ssl-ciphers", Invalid, 0, 0, nil, "MEDIUM"},
		{map[string]string{"proxy-ssl-ciphers": "DEFAULT:AES128-SHA"}, "proxy-ssl-ciphers", Invalid, 0, 0, nil, "DEFAULT stands alone"},
		{map[string]string{"proxy-ssl-ciphers": "RC4-SHA:!RC4"}, "proxy-ssl-ciphers", Invalid, 0, 0, nil, "no cipher suite"},
		{map[string]string{"proxy-ssl-protocols": "TLSv1.3", "proxy-ssl-ciphers": "HIGH"}, "proxy-ssl-ciphers", Ignored, tls.VersionTLS13, tls.VersionTLS13, nil, "TLS 1.3 only"},
	} {
		https := map[string]string{"backend-protocol": "HTTPS"}
		for k, v := range tc.annotations {
			https[k] = v
		}
		s, outcomes := parseNginxAnnotations(nginxTestIngress(https))
		o := nginxOutcome(outcomes, tc.name)
		if o == nil || o.Outcome != tc.want || !strings.Contains(o.Reason, tc.reason) {
			t.Errorf("%v: %s is %v, want %s with %q", tc.annotations, tc.name, o, tc.want, tc.reason)
			continue
		}
		b := s.backendTLS
		if b.MinVersion != tc.min || b.MaxVersion != tc.max || !slices.Equal(b.CipherSuites, tc.suites) {
			t.Errorf("%v: offers %#x-%#x %x, want %#x-%#x %x", tc.annotations, b.MinVersion, b.MaxVersion, b.CipherSuites, tc.min, tc.max, tc.suites)
		}
		// Without backend-protocol HTTPS or GRPCS they do nothing.
		_, outcomes = parseNginxAnnotations(nginxTestIngress(tc.annotations))
		if o := nginxOutcome(outcomes, tc.name); o.Outcome != Ignored && o.Outcome != Invalid {
			t.Errorf("%v without backend-protocol: %s is %v", tc.annotations, tc.name, o)
		}
	}
}

// secureTLS12 are the TLS 1.2 suites Go counts as secure, in its order.
func secureTLS12() []uint16 {
	var ids []uint16
	for _, c := range tls.CipherSuites() {
		if !slices.Contains(c.SupportedVersions, tls.VersionTLS13) {
			ids = append(ids, c.ID)
		}
	}
	return ids
}
