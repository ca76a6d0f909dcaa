// Package htpasswd reads password files as nginx's auth_basic_user_file
// does and checks passwords against their hashes. It owns the hash
// formats hostgate accepts; callers keep the entries and decide what a
// check guards.
package htpasswd

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Entry is one user of a password file.
type Entry struct {
	User string
	Hash string
}

// Parse reads a password file: one "user:hash[:comment]" a line, blank
// lines and lines starting with "#" skipped. A line that names no user or
// whose hash hostgate cannot check is left out and described in problems
// (by line number, never with its hash); the first entry of a user counts,
// as nginx reads the file top down.
func Parse(data []byte) (entries []Entry, problems []string) {
	seen := map[string]bool{}
	for n, line := range bytes.Split(data, []byte("\n")) {
		text := strings.TrimRight(string(line), "\r")
		if text == "" || text[0] == '#' {
			continue
		}
		user, hash, ok := strings.Cut(text, ":")
		if !ok || user == "" {
			problems = append(problems, fmt.Sprintf("line %d: not user:hash", n+1))
			continue
		}
		hash, _, _ = strings.Cut(hash, ":")
		if err := Check(hash); err != nil {
			problems = append(problems, fmt.Sprintf("line %d (user %q): %v", n+1, user, err))
			continue
		}
		if seen[user] {
			continue
		}
		seen[user] = true
		entries = append(entries, Entry{User: user, Hash: hash})
	}
	return entries, problems
}

// Check reports whether hostgate can check passwords against hash:
// bcrypt ($2a$, $2b$, $2y$), Apache's MD5 ($apr1$) and MD5-crypt ($1$),
// {SHA} and {SSHA} (salted SHA-1) as base64, and {PLAIN}. nginx hands
// other hashes to the system's crypt(3); traditional DES crypt, which
// reads only eight characters of a password, is not accepted.
func Check(hash string) error {
	switch {
	case isBcrypt(hash):
		_, err := bcrypt.Cost([]byte(hash))
		return err
	case strings.HasPrefix(hash, apr1Magic), strings.HasPrefix(hash, md5Magic):
		_, salt, sum, ok := splitMD5Crypt(hash)
		if !ok || len(salt) > 8 || len(sum) != 22 {
			return errors.New("not an MD5-crypt hash ($apr1$salt$digest)")
		}
	case strings.HasPrefix(hash, "{SHA}"):
		if d, err := base64.StdEncoding.DecodeString(hash[5:]); err != nil || len(d) != sha1.Size {
			return errors.New("{SHA} must be followed by the base64 of a SHA-1 digest")
		}
	case strings.HasPrefix(hash, "{SSHA}"):
		if d, err := base64.StdEncoding.DecodeString(hash[6:]); err != nil || len(d) <= sha1.Size {
			return errors.New("{SSHA} must be followed by the base64 of a SHA-1 digest and a salt")
		}
	case strings.HasPrefix(hash, "{PLAIN}"):
	case strings.HasPrefix(hash, "$"):
		return errors.New("hash scheme not supported (bcrypt, $apr1$, $1$, {SHA}, {SSHA} and {PLAIN} are)")
	default:
		return errors.New("traditional crypt(3) (DES) hashes are not supported: use bcrypt (htpasswd -B)")
	}
	return nil
}

// Verify reports whether password matches hash, which Check accepted.
func Verify(hash, password string) bool {
	switch {
	case isBcrypt(hash):
		return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
	case strings.HasPrefix(hash, apr1Magic), strings.HasPrefix(hash, md5Magic):
		magic, salt, _, ok := splitMD5Crypt(hash)
		return ok && subtle.ConstantTimeCompare([]byte(md5Crypt(password, salt, magic)), []byte(hash)) == 1
	case strings.HasPrefix(hash, "{SHA}"):
		sum := sha1.Sum([]byte(password))
		return subtle.ConstantTimeCompare([]byte(base64.StdEncoding.EncodeToString(sum[:])), []byte(hash[5:])) == 1
	case strings.HasPrefix(hash, "{SSHA}"):
		d, err := base64.StdEncoding.DecodeString(hash[6:])
		if err != nil || len(d) <= sha1.Size {
			return false
		}
		sum := sha1.Sum(append([]byte(password), d[sha1.Size:]...))
		return subtle.ConstantTimeCompare(sum[:], d[:sha1.Size]) == 1
	case strings.HasPrefix(hash, "{PLAIN}"):
		return subtle.ConstantTimeCompare([]byte(password), []byte(hash[7:])) == 1
	}
	return false
}

func isBcrypt(hash string) bool {
	return strings.HasPrefix(hash, "$2a$") || strings.HasPrefix(hash, "$2b$") || strings.HasPrefix(hash, "$2y$")
}

const (
	apr1Magic = "$apr1$"
	md5Magic  = "$1$"
)

// splitMD5Crypt splits magic$salt$digest.
func splitMD5Crypt(hash string) (magic, salt, digest string, ok bool) {
	magic = md5Magic
	if strings.HasPrefix(hash, apr1Magic) {
		magic = apr1Magic
	}
	salt, digest, ok = strings.Cut(hash[len(magic):], "$")
	return magic, salt, digest, ok
}

// md5Crypt is Poul-Henning Kamp's MD5-crypt, which Apache's "$apr1$"
// differs from only in its magic string.
func md5Crypt(password, salt, magic string) string {
	pw := []byte(password)
	alt := md5.New()
	alt.Write(pw)
	alt.Write([]byte(salt))
	alt.Write(pw)
	mixin := alt.Sum(nil)

	d := md5.New()
	d.Write(pw)
	d.Write([]byte(magic))
	d.Write([]byte(salt))
	for i := len(pw); i > 0; i -= 16 {
		d.Write(mixin[:min(16, i)])
	}
	for i := len(pw); i > 0; i >>= 1 {
		if i&1 != 0 {
			d.Write([]byte{0})
		} else {
			d.Write(pw[:1])
		}
	}
	final := d.Sum(nil)
	for i := range 1000 {
		r := md5.New()
		if i&1 != 0 {
			r.Write(pw)
		} else {
			r.Write(final)
		}
		if i%3 != 0 {
			r.Write([]byte(salt))
		}
		if i%7 != 0 {
			r.Write(pw)
		}
		if i&1 != 0 {
			r.Write(final)
		} else {
			r.Write(pw)
		}
		final = r.Sum(final[:0])
	}
	out := []byte(magic + salt + "$")
	for _, g := range [][3]int{{0, 6, 12}, {1, 7, 13}, {2, 8, 14}, {3, 9, 15}, {4, 10, 5}} {
		out = to64(out, uint(final[g[0]])<<16|uint(final[g[1]])<<8|uint(final[g[2]]), 4)
	}
	return string(to64(out, uint(final[11]), 2))
}

// to64 appends n characters of crypt's base64 of v, low bits first.
func to64(out []byte, v uint, n int) []byte {
	const chars = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	for range n {
		out = append(out, chars[v&0x3f])
		v >>= 6
	}
	return out
}
