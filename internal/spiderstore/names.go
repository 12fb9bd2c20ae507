package spiderstore

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxProjectLen bounds a project name.
const MaxProjectLen = 100

// CheckProject validates a project name as Scrapyd takes it: the characters setuptools keeps in
// a distribution's name (letters, digits, ".", "_", "-") and the quotes and spaces a scrapy.cfg
// may hold (`project = "my project"`). Other whitespace, a name of only dots and a leading or
// trailing space are refused: a project is a path element of /logs/<project>/… and of the
// egg's file name.
func CheckProject(project string) error {
	if project == "" {
		return fmt.Errorf("%w: missing project", ErrInvalid)
	}
	ok := len(project) <= MaxProjectLen && strings.Trim(project, ".") != "" && strings.TrimSpace(project) == project
	for _, r := range project {
		if !projectRune(r) {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("%w: project %q: want 1-%d of A-Z a-z 0-9 . _ - ' \" and spaces, not only dots, no leading or trailing space",
			ErrInvalid, clip(project), MaxProjectLen)
	}
	return nil
}

func projectRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(`._-'" `, r)
}

// SpiderName is the name crawlq runs a spider of an uploaded project under:
// "<project>.<spider>", the project with every byte outside [A-Za-z0-9_-] written as %XX, so the
// first "." always ends the project (a Scrapy spider's name may hold dots too) and the name is
// safe in metric dimensions, file names and object keys. A project of those characters only
// (every project before dots were taken) keeps its name as it is.
func SpiderName(project, spider string) string {
	return escapeProject(project) + "." + spider
}

// SplitName splits a SpiderName; ok is false for a spec spider's name (which holds no ".").
func SplitName(name string) (project, spider string, ok bool) {
	p, s, ok := strings.Cut(name, ".")
	if !ok || s == "" {
		return "", "", false
	}
	project, ok = unescapeProject(p)
	if !ok || CheckProject(project) != nil {
		return "", "", false
	}
	return project, s, true
}

func escapeProject(project string) string {
	var b strings.Builder
	for i := 0; i < len(project); i++ {
		c := project[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// unescapeProject inverts escapeProject; ok is false for what escapeProject never writes.
func unescapeProject(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		c, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(c))
		i += 2
	}
	out := b.String()
	return out, escapeProject(out) == s
}
