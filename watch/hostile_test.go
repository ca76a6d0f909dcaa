package watch

import (
	"os"
	"testing"
)

// TestFileModeHostile loads the hostile golden case through file mode, as
// a user's folder is read: what it serves is what TestGolden found, the one
// clean route, so files get the same validation as the golden translation.
func TestFileModeHostile(t *testing.T) {
	want, err := os.ReadFile("testdata/hostile/snapshot.golden")
	if err != nil {
		t.Fatal(err)
	}
	if got := describeSnapshot(next(t, startFile(t, "testdata/hostile/input.yaml", goldenOptions))); got != string(want) {
		t.Errorf("file mode serves:\n%s\nwant (testdata/hostile/snapshot.golden):\n%s", got, want)
	}
}
