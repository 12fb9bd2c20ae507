package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Link is a relative link of a Markdown file: [text](Target#Anchor).
type Link struct {
	Line   int
	Target string // a path relative to the file, "" for an anchor in the file itself
	Anchor string // without '#', "" for none
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`^#{1,6} (.+)$`)
	slugDrop  = regexp.MustCompile(`[^\p{L}\p{N}_ -]`)
)

// Links returns the relative links of a Markdown file, outside code blocks; links with a scheme
// (https:, mailto:) are left out.
func Links(markdown string) []Link {
	var out []Link
	inCode := false
	for i, l := range strings.Split(markdown, "\n") {
		if isFence(l) {
			inCode = !inCode
			continue
		}
		if inCode {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCodeSpans(l), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			out = append(out, Link{Line: i + 1, Target: path, Anchor: anchor})
		}
	}
	return out
}

// isFence says whether a Markdown line opens or closes a fenced code block.
func isFence(line string) bool {
	t := strings.TrimSpace(line)
	return strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")
}

func stripCodeSpans(l string) string {
	parts := strings.Split(l, "`")
	for i := 1; i < len(parts); i += 2 {
		parts[i] = ""
	}
	return strings.Join(parts, "`")
}

// Anchors returns the anchors of a Markdown file's headings, as GitHub makes them: lower case,
// punctuation dropped, spaces as hyphens, a repeated one suffixed -1, -2, ...
func Anchors(markdown string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inCode := false
	for _, l := range strings.Split(markdown, "\n") {
		if isFence(l) {
			inCode = !inCode
			continue
		}
		m := headingRE.FindStringSubmatch(l)
		if inCode || m == nil {
			continue
		}
		slug := strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// CheckLinks returns what is wrong with the relative links of the Markdown file at path: a
// target that does not exist, or an anchor that no heading of a Markdown target makes.
func CheckLinks(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, l := range Links(string(b)) {
		target := path
		if l.Target != "" {
			target = filepath.Join(filepath.Dir(path), filepath.FromSlash(l.Target))
			if _, err := os.Stat(target); err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: link to %s: no such file", path, l.Line, l.Target))
				continue
			}
		}
		if l.Anchor == "" || !strings.HasSuffix(target, ".md") {
			continue
		}
		tb, err := os.ReadFile(target)
		if err != nil {
			return nil, err
		}
		if !Anchors(string(tb))[l.Anchor] {
			problems = append(problems, fmt.Sprintf("%s:%d: link to %s#%s: no such heading", path, l.Line, l.Target, l.Anchor))
		}
	}
	return problems, nil
}
