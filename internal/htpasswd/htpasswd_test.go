package htpasswd

import (
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestVerify(t *testing.T) {
	b, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	y := "$2y$" + string(b[4:])
	for _, c := range []struct {
		hash, good string
	}{
		{string(b), "secret"},
		{y, "secret"},
		// openssl passwd -apr1 -salt saltsalt secret
		{"$apr1$saltsalt$LrttParrLPdxvgutaSXWJ0", "secret"},
		// openssl passwd -apr1 -salt x ''
		{"$apr1$x$tMwYqBfQwi3FYAr0aJc8M/", ""},
		// openssl passwd -1 -salt ab pw
		{"$1$ab$b2XAKzcGJvTR.javvk3280", "pw"},
		{"{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", "password"},
		{"{PLAIN}plain", "plain"},
	} {
		if err := Check(c.hash); err != nil {
			t.Errorf("Check(%q): %v", c.hash, err)
		}
		if !Verify(c.hash, c.good) {
			t.Errorf("Verify(%q, %q) = false", c.hash, c.good)
		}
		if Verify(c.hash, c.good+"x") {
			t.Errorf("Verify(%q, %q) = true", c.hash, c.good+"x")
		}
	}
}

func TestParse(t *testing.T) {
	file := "# users\nalice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=:comment\r\n\nbob:abJnggxhB/yWI\nnocolon\nalice:{PLAIN}other\n:{PLAIN}x\ncarol:$5$rounds$x\n"
	entries, problems := Parse([]byte(file))
	if len(entries) != 1 || entries[0] != (Entry{"alice", "{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="}) {
		t.Errorf("entries = %q", entries)
	}
	want := []string{"line 4 (user \"bob\"): traditional crypt", "line 5: not user:hash", "line 7: not user:hash", "line 8 (user \"carol\"): hash scheme not supported"}
	if len(problems) != len(want) {
		t.Fatalf("problems = %q", problems)
	}
	for i, w := range want {
		if !strings.HasPrefix(problems[i], w) {
			t.Errorf("problems[%d] = %q, want prefix %q", i, problems[i], w)
		}
		if strings.Contains(problems[i], "abJngg") {
			t.Errorf("problems[%d] = %q shows a hash", i, problems[i])
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("alice:$apr1$saltsalt$LrttParrLPdxvgutaSXWJ0\nbob:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n"))
	f.Add([]byte("x:{SSHA}AAAAAAAAAAAAAAAAAAAAAAAAAAAA\n#c\n\ny:$1$$\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, _ := Parse(data)
		for _, e := range entries {
			if Check(e.Hash) != nil || e.User == "" || strings.ContainsAny(e.User, ":\n") {
				t.Fatalf("entry %q accepted", e)
			}
			if !isBcrypt(e.Hash) {
				// Cheap hashes only: bcrypt's cost makes the fuzzer crawl.
				Verify(e.Hash, "password")
			}
		}
	})
}
