package urlstate

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"crawlq/internal/dbsqlc"
)

// LoadWalk is LoadMany for a walk (internal/crawl): the pages behind a page found as it was,
// which are themselves recorded as they were or left to page jobs. Such a page needs its links
// and how many items it has, not the items: each State's Items is nil and NItems their number.
// A walk reads a state a page of a recrawl, so its links are decoded without reflection and its
// items counted without building their map (the two were a third of a walk's state read).
func LoadWalk(ctx context.Context, q *dbsqlc.Queries, spider, line string, urls []string) (map[string]*State, error) {
	return load(ctx, q, spider, line, urls, func(st *State, row dbsqlc.GetURLStatesRow) (err error) {
		if st.Links, err = decodeStrings(row.Links); err != nil {
			return fmt.Errorf("links: %w", err)
		}
		if st.NItems, err = countKeys(row.Items); err != nil {
			return fmt.Errorf("items: %w", err)
		}
		return nil
	})
}

// decodeStrings decodes a JSON array of strings as Postgres writes a jsonb one (["a", "b"]): the
// strings are cut from one copy of b. Anything else it leaves to encoding/json (a string with an
// escape, another spelling, an error).
func decodeStrings(b []byte) ([]string, error) {
	s := string(b)
	i := skipSpace(s, 0)
	if i == len(s) || s[i] != '[' {
		return slowStrings(b)
	}
	out := make([]string, 0, 8)
	if i = skipSpace(s, i+1); i < len(s) && s[i] == ']' {
		return ended(out, s, i+1, b)
	}
	for i < len(s) && s[i] == '"' {
		j := i + 1
		for j < len(s) && s[j] != '"' && s[j] != '\\' && s[j] >= 0x20 {
			j++
		}
		if j == len(s) || s[j] != '"' || !utf8.ValidString(s[i+1:j]) {
			return slowStrings(b) // an escape, a control character or bad UTF-8: encoding/json's rules
		}
		out = append(out, s[i+1:j])
		switch i = skipSpace(s, j+1); {
		case i < len(s) && s[i] == ',':
			i = skipSpace(s, i+1)
		case i < len(s) && s[i] == ']':
			return ended(out, s, i+1, b)
		default:
			return slowStrings(b)
		}
	}
	return slowStrings(b)
}

func slowStrings(b []byte) ([]string, error) {
	var out []string
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ended returns out when only white space follows the array's end at i of s (b's text).
func ended(out []string, s string, i int, b []byte) ([]string, error) {
	if skipSpace(s, i) != len(s) {
		return slowStrings(b)
	}
	return out, nil
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// countKeys counts the keys of a JSON object (a page's items: key -> hash) as Postgres writes a
// jsonb one (valid JSON, its keys distinct), without decoding it: the colons outside strings at
// its top level. What is not an object of balanced brackets and strings is left to
// encoding/json, for its error.
func countKeys(b []byte) (int, error) {
	depth, n, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString && c == '\\':
			i++ // the escaped character
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == ':' && depth == 1:
			n++
		}
	}
	if i := skipSpace(string(b[:min(len(b), 8)]), 0); depth != 0 || inString || i == len(b) || b[i] != '{' {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return 0, err
		}
		return len(m), nil
	}
	return n, nil
}
