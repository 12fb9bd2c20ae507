package cli

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A clipped message (--watch's last error, an api answer quoted in an error) is valid UTF-8: a
// cut through a character would print as garbage on the terminal.
func TestClipMsgKeepsCharactersWhole(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 80, "short"},
		{"a" + strings.Repeat("é", 50), 80, "a" + strings.Repeat("é", 39) + "..."},
		{"Zeitüberschreitung beim Lesen", 5, "Zeit..."},
		{"bad \xff byte", 80, "bad ? byte"},
	} {
		got := clipMsg(c.in, c.n)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("clipMsg(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
