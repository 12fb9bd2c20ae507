package spider

import (
	"strings"
)

// The streaming extractor (stream.go) matches selectors itself, without a DOM. It does so only
// for the subset parsed here, whose meaning on a tree is plain: compound selectors made of a
// type (or *) and any of .class, #id, [attr], [attr=value], [attr~=value], joined by the
// descendant (space) and child (>) combinators, comma-separated. Anything else (pseudo-classes,
// escapes, other attribute operators, sibling combinators) leaves the spider on the DOM path,
// where cascadia matches it. Within the subset a match is exactly cascadia's on the same tree:
// type names are compared lower-cased, class and id case-sensitively, and an attribute test
// passes if any attribute of that name passes it (duplicate attributes are kept by the parser).

// compound is one compound selector: a type (empty for any element) and attribute tests.
type compound struct {
	tag   string
	tests []attrTest
}

type attrTest struct {
	key, val string
	op       byte // 0: present, '=': equal, '~': one of the whitespace-separated words
}

// complexSel is compounds joined by combinators: child[i] says parts[i] and parts[i+1] are
// joined by '>' (else by a space). Each part is an index into the plan's compounds.
type complexSel struct {
	parts []int
	child []bool
}

// selGroup is a comma-separated selector list.
type selGroup []complexSel

// parseSimple parses s into compounds (appended to *comps) and a group, or reports false
// when s is outside the subset.
func parseSimple(s string, comps *[]compound) (selGroup, bool) {
	var g selGroup
	for _, part := range strings.Split(s, ",") {
		c, ok := parseComplex(part, comps)
		if !ok {
			return nil, false
		}
		g = append(g, c)
	}
	return g, len(g) > 0
}

func parseComplex(s string, comps *[]compound) (complexSel, bool) {
	var c complexSel
	i := 0
	skipSpace := func() bool {
		start := i
		for i < len(s) && isCSSSpace(s[i]) {
			i++
		}
		return i > start
	}
	skipSpace()
	for {
		comp, n, ok := parseCompound(s[i:])
		if !ok {
			return complexSel{}, false
		}
		i += n
		*comps = append(*comps, comp)
		c.parts = append(c.parts, len(*comps)-1)
		spaced := skipSpace()
		if i == len(s) {
			return c, true
		}
		child := false
		if s[i] == '>' {
			child = true
			i++
			skipSpace()
		} else if !spaced {
			return complexSel{}, false // '+', '~' or something unexpected
		}
		c.child = append(c.child, child)
	}
}

// parseCompound parses a compound selector at the start of s, returning how much it used.
func parseCompound(s string) (compound, int, bool) {
	var c compound
	i := 0
	if i < len(s) && s[i] == '*' {
		i++
	} else if n := identLen(s[i:]); n > 0 {
		c.tag = strings.ToLower(s[i : i+n])
		i += n
	}
	for i < len(s) {
		switch s[i] {
		case '.', '#':
			n := identLen(s[i+1:])
			if n == 0 {
				return c, 0, false
			}
			key := "class"
			op := byte('~')
			if s[i] == '#' {
				key, op = "id", '='
			}
			c.tests = append(c.tests, attrTest{key: key, val: s[i+1 : i+1+n], op: op})
			i += 1 + n
		case '[':
			t, n, ok := parseAttrTest(s[i:])
			if !ok {
				return c, 0, false
			}
			c.tests = append(c.tests, t)
			i += n
		default:
			if i == 0 {
				return c, 0, false
			}
			return c, i, true
		}
	}
	return c, i, i > 0
}

// parseAttrTest parses [key], [key=val] or [key~=val]; val is an identifier or a quoted string
// without escapes.
func parseAttrTest(s string) (attrTest, int, bool) {
	i := 1
	n := identLen(s[i:])
	if n == 0 {
		return attrTest{}, 0, false
	}
	t := attrTest{key: strings.ToLower(s[i : i+n])}
	i += n
	if i < len(s) && s[i] == ']' {
		return t, i + 1, true
	}
	switch {
	case strings.HasPrefix(s[i:], "="):
		t.op = '='
		i++
	case strings.HasPrefix(s[i:], "~="):
		t.op = '~'
		i += 2
	default:
		return attrTest{}, 0, false
	}
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		end := strings.IndexByte(s[i+1:], s[i])
		if end < 0 || strings.ContainsRune(s[i+1:i+1+end], '\\') {
			return attrTest{}, 0, false
		}
		t.val = s[i+1 : i+1+end]
		i += end + 2
	} else {
		n := identLen(s[i:])
		if n == 0 {
			return attrTest{}, 0, false
		}
		t.val = s[i : i+n]
		i += n
	}
	if i >= len(s) || s[i] != ']' {
		return attrTest{}, 0, false
	}
	return t, i + 1, true
}

// identLen is the length of a plain CSS identifier at the start of s: ASCII letters, digits,
// '-' and '_', not starting with a digit or "-digit" (escapes and non-ASCII take the DOM path).
func identLen(s string) int {
	n := 0
	for n < len(s) {
		c := s[n]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-' || c >= '0' && c <= '9' {
			n++
			continue
		}
		break
	}
	if n == 0 || s[0] >= '0' && s[0] <= '9' || s[0] == '-' && (n == 1 || s[1] >= '0' && s[1] <= '9' || s[1] == '-') {
		return 0
	}
	return n
}

func isCSSSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

// tokenAttr is one attribute of the start tag being read, valid until the next token.
type tokenAttr struct{ key, val []byte }

// matches reports whether an element named name with attributes attrs matches c.
func (c *compound) matches(name []byte, attrs []tokenAttr) bool {
	if c.tag != "" && string(name) != c.tag {
		return false
	}
	for _, t := range c.tests {
		ok := false
		for _, a := range attrs {
			if string(a.key) == t.key && t.pass(a.val) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func (t attrTest) pass(v []byte) bool {
	switch t.op {
	case 0:
		return true
	case '=':
		return string(v) == t.val
	}
	// cascadia's matchInclude: the words between single whitespace characters.
	for len(v) > 0 {
		i := -1
		for j, c := range v {
			if c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' {
				i = j
				break
			}
		}
		if i < 0 {
			return string(v) == t.val
		}
		if string(v[:i]) == t.val {
			return true
		}
		v = v[i+1:]
	}
	return false
}
