// Package docscheck reads the project's Markdown docs for what `make docs-check` checks: the
// shell blocks a reader is told to run (run by the package's test against a fresh database and
// a built bin/crawlq) and the relative links between the docs (each must resolve to a file, and
// an anchor to a heading of it).
//
// A fenced block whose info string is `sh` is a command block. An HTML comment on a line of its
// own before it, invisible on the rendered page, says how it is checked:
//
//	<!-- docs-check: skip REASON -->   not run (it needs AWS, or minutes); the reason is required
//	<!-- docs-check: flags -->         each crawlq command runs with --help appended (its command
//	                                   and flags must exist), each make target with make -n
//	<!-- docs-check: run CMD -->       CMD runs at this point, unseen by the reader (a wait for a
//	                                   server the reader would see start)
//
// Blocks without a comment run as written, in order, in one shell per file.
package docscheck

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"
)

// Mode is how a command block is checked.
type Mode int

const (
	Run   Mode = iota // run as written
	Skip              // not run; Reason says why
	Flags             // commands checked to exist with their flags, not run
)

// Block is one fenced `sh` block of a file, or a hidden command (Hidden).
type Block struct {
	Line   int    // 1-based line of the opening fence (or of the comment, for a hidden command)
	Mode   Mode   // how it is checked
	Reason string // with Skip
	Text   string // the commands, as written
	Hidden bool   // a `docs-check: run` command the reader does not see
}

var directive = regexp.MustCompile(`^<!-- docs-check: (skip|flags|run)(?: (.*?))? -->$`)

// Blocks returns a Markdown file's command blocks in order. A bad directive (skip without a
// reason, run without a command, one that no block follows) is an error naming its line.
func Blocks(markdown string) ([]Block, error) {
	var out []Block
	var pending *Block // a skip or flags directive waiting for its block
	var fence string   // the open fence, "" outside a block
	var cur *Block
	var indent string // the open block's fence indentation (a block inside a list item), which its lines carry too
	var text strings.Builder
	sc := bufio.NewScanner(strings.NewReader(markdown))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		l := sc.Text()
		trimmed := strings.TrimSpace(l)
		if fence != "" {
			if strings.TrimSpace(l) == fence {
				if cur != nil {
					cur.Text = text.String()
					out = append(out, *cur)
					cur = nil
				}
				fence = ""
				continue
			}
			if cur != nil {
				text.WriteString(strings.TrimPrefix(l, indent))
				text.WriteByte('\n')
			}
			continue
		}
		if isFence(trimmed) {
			marker := trimmed[:3]
			info := strings.TrimSpace(strings.TrimLeft(trimmed, marker[:1]))
			fence = strings.Repeat(marker[:1], len(trimmed)-len(strings.TrimLeft(trimmed, marker[:1])))
			if info == "sh" {
				b := Block{Line: line, Mode: Run}
				if pending != nil {
					b.Mode, b.Reason = pending.Mode, pending.Reason
					pending = nil
				}
				cur = &b
				text.Reset()
				indent = l[:len(l)-len(strings.TrimLeft(l, " "))]
			} else if pending != nil {
				return nil, fmt.Errorf("line %d: a docs-check %s comment must come right before a ```sh block", pending.Line, modeName(pending.Mode))
			}
			continue
		}
		m := directive.FindStringSubmatch(trimmed)
		if m == nil {
			if strings.Contains(trimmed, "docs-check:") {
				return nil, fmt.Errorf("line %d: unknown docs-check comment %q (want skip REASON, flags or run CMD)", line, trimmed)
			}
			if pending != nil && trimmed != "" {
				return nil, fmt.Errorf("line %d: a docs-check %s comment must come right before a ```sh block", pending.Line, modeName(pending.Mode))
			}
			continue
		}
		switch m[1] {
		case "skip":
			if strings.TrimSpace(m[2]) == "" {
				return nil, fmt.Errorf("line %d: docs-check skip needs a reason", line)
			}
			pending = &Block{Line: line, Mode: Skip, Reason: m[2]}
		case "flags":
			pending = &Block{Line: line, Mode: Flags}
		case "run":
			if strings.TrimSpace(m[2]) == "" {
				return nil, fmt.Errorf("line %d: docs-check run needs a command", line)
			}
			out = append(out, Block{Line: line, Mode: Run, Text: m[2] + "\n", Hidden: true})
		}
	}
	if fence != "" {
		return nil, fmt.Errorf("a code block is not closed")
	}
	if pending != nil {
		return nil, fmt.Errorf("line %d: a docs-check %s comment must come right before a ```sh block", pending.Line, modeName(pending.Mode))
	}
	return out, sc.Err()
}

func modeName(m Mode) string {
	switch m {
	case Skip:
		return "skip"
	case Flags:
		return "flags"
	}
	return "run"
}

var heredocRE = regexp.MustCompile(`<<-?\s*'?"?([A-Za-z_]+)'?"?`)

// Strict makes a failure anywhere in a line's `a && b` list fail the script: `set -e` ignores a
// failing command before the last && (so `crawlq run ID --wait && crawlq items ID` would pass
// with the run failed). After each such command line (not inside a heredoc, not continued with a
// backslash, not sent to the background) it adds a line that exits with the line's status.
func Strict(text string) string {
	var b strings.Builder
	heredoc := ""
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		b.WriteString(l)
		b.WriteByte('\n')
		t := strings.TrimSpace(l)
		if heredoc != "" {
			if t == heredoc {
				heredoc = ""
			}
			continue
		}
		if m := heredocRE.FindStringSubmatch(l); m != nil {
			heredoc = m[1]
			continue
		}
		code := t
		if i := strings.Index(code, " #"); i >= 0 {
			code = strings.TrimSpace(code[:i])
		}
		if strings.Contains(code, "&&") && !strings.HasSuffix(code, "\\") && !strings.HasSuffix(code, "&") {
			b.WriteString("rc=$?; [ $rc -eq 0 ] || exit $rc\n")
		}
	}
	return b.String()
}

// FlagChecks turns a block's commands into checks that they exist with their flags: crawlq
// commands get --help (which exits 0 only when every flag before it is known), make targets
// make -n, scripts a test that they are executable.
func FlagChecks(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if i := strings.Index(l, " #"); i >= 0 {
			l = strings.TrimSpace(l[:i])
		}
		l = strings.TrimSuffix(strings.TrimSpace(strings.TrimSuffix(l, "&")), ";")
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		for _, c := range strings.Split(l, "; ") {
			fields := strings.Fields(c)
			for len(fields) > 0 && strings.Contains(fields[0], "=") { // VAR=value prefixes
				fields = fields[1:]
			}
			if len(fields) == 0 {
				continue
			}
			switch {
			case fields[0] == "crawlq" || fields[0] == "bin/crawlq":
				out = append(out, strings.Join(fields, " ")+" --help >/dev/null")
			case fields[0] == "make":
				out = append(out, "make -n "+strings.Join(fields[1:], " ")+" >/dev/null")
			case strings.HasPrefix(fields[0], "scripts/"):
				out = append(out, "test -x "+fields[0])
			case fields[0] == "go" && len(fields) > 1 && fields[1] == "test":
				out = append(out, strings.Join(fields, " ")+" -list . >/dev/null")
			}
		}
	}
	return out
}
