package spider

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func parseFile(t *testing.T, name string) []FieldError {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseSpec(data, name)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("%s: %v, want a *ValidationError", name, err)
	}
	return ve.Errors
}

func TestUnknownFieldNamesTheNearestKnownField(t *testing.T) {
	t.Parallel()
	got := parseFile(t, "typos.yaml")
	want := []FieldError{
		{Path: "concurency", Msg: `unknown field (line 5); did you mean "concurrency"?`},
		{Path: "Obey_robots", Msg: `unknown field (line 6); did you mean "obey_robots"?`},
		{Path: "items[0].fields.sku.cs", Msg: `unknown field (line 10); did you mean "css"?`},
		{Path: "flavour", Msg: "unknown field (line 11)"}, // nothing near: no guess
	}
	if !slices.Equal(got, want) {
		t.Errorf("errors\n%q\nwant\n%q", got, want)
	}
}

func TestSyntaxErrorNamesItsLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ file, want string }{
		{"unclosed.yaml", "parse: line 6: did not find expected ',' or ']'"},       // where the list opens
		{"misindented.yaml", "parse: line 3: did not find expected '-' indicator"}, // where the list starts
	} {
		got := parseFile(t, c.file)
		if len(got) != 1 || got[0].Msg != c.want {
			t.Errorf("%s: %q, want %q", c.file, got, c.want)
		}
	}
}

// Two letters swapped are one slip: "dealy" is taken for delay, as a letter left out would be.
func TestSuggestTakesASwapForOneSlip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ key, want string }{
		{"dealy", `; did you mean "delay"?`},
		{"max_pgaes", `; did you mean "max_pages"?`},
		{"delay", `; did you mean "delay"?`},
		{"flavour", ""},
	} {
		if got := Suggest(c.key, "delay", "max_pages", "concurrency"); got != c.want {
			t.Errorf("Suggest(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}
