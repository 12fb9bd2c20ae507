package robots

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxValueBytes bounds one rule's value. Longer values are cut, which for a path
// prefix only makes the rule match more (more restrictive, never less).
const maxValueBytes = 2048

// noopRule keeps a group that has only empty rules (e.g. "Disallow:") alive as a
// group of its own: the library merges User-agent lines with no rule between them
// into one group, and drops agents with no rules. It matches no real path, since
// cleanPath escapes NUL.
const noopRule = "Allow: /\x00\n"

// unmatchedAgent stands in for a User-agent value with no product token, so the
// group boundary stays where it was without the group matching any crawler ("!" is
// never part of a product token).
const unmatchedAgent = "!unmatched"

// normalize rewrites a robots.txt into the small, strict form the parser accepts
// without error, following RFC 9309 for what is malformed: lines outside a group,
// unknown keys, lines without a colon and bad Crawl-delay values are skipped
// (counted in skipped) instead of failing the whole file. It also returns the
// product tokens that head groups.
func normalize(body []byte) (text string, agents map[string]bool, skipped int) {
	if len(body) > MaxBodyBytes {
		body = body[:MaxBodyBytes]
		if i := bytes.LastIndexAny(body, "\r\n"); i >= 0 {
			body = body[:i]
		}
	}
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))

	var out strings.Builder
	out.Grow(len(body) / 2)
	agents = make(map[string]bool)
	inGroup := false      // a User-agent line has been seen
	groupHasRule := false // the current group has rule lines, so the next User-agent starts a new one
	groupEmitted := false // some rule line of the current group was written out

	for len(body) > 0 {
		var line []byte
		if i := bytes.IndexAny(body, "\r\n"); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			line, body = body, nil
		}
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			skipped++
			continue
		}
		key := strings.ToLower(string(bytes.TrimSpace(line[:colon])))
		value := firstField(line[colon+1:])

		switch key {
		case "user-agent", "useragent", "user agent":
			if groupHasRule {
				if !groupEmitted {
					out.WriteString(noopRule)
				}
				groupHasRule, groupEmitted = false, false
			}
			tok := unmatchedAgent
			if value == "*" || strings.HasPrefix(value, "*") {
				tok = "*"
			} else if t := productToken(value); t != "*" {
				tok = t
			} else {
				skipped++
			}
			agents[tok] = true
			inGroup = true
			out.WriteString("User-agent: " + tok + "\n")

		case "allow", "disallow":
			if !inGroup {
				skipped++
				continue
			}
			groupHasRule = true
			if value == "" {
				continue // an empty rule allows; the group is kept by noopRule
			}
			groupEmitted = true
			if key == "allow" {
				out.WriteString("Allow: ")
			} else {
				out.WriteString("Disallow: ")
			}
			out.WriteString(value)
			out.WriteByte('\n')

		case "crawl-delay", "crawldelay":
			secs, err := strconv.ParseFloat(value, 64)
			if !inGroup || err != nil || secs < 0 || math.IsNaN(secs) || math.IsInf(secs, 0) {
				skipped++
				continue
			}
			secs = min(secs, MaxCrawlDelay.Seconds())
			groupHasRule, groupEmitted = true, true
			out.WriteString("Crawl-delay: " + strconv.FormatFloat(secs, 'f', -1, 64) + "\n")

		case "sitemap":
			if value != "" {
				out.WriteString("Sitemap: " + value + "\n")
			}

		default:
			// Unknown keys (Host, Clean-param, Noindex, ...) are not errors under RFC 9309.
		}
	}
	// A trailing group with no rules is a group that allows everything.
	if inGroup && !groupEmitted {
		out.WriteString(noopRule)
	}
	return out.String(), agents, skipped
}

// firstField is the value up to its first whitespace, as valid UTF-8 of bounded
// length. Values with spaces are not valid robots.txt; the rest is ignored.
func firstField(v []byte) string {
	v = bytes.TrimSpace(v)
	if i := bytes.IndexAny(v, " \t\v\f"); i >= 0 {
		v = v[:i]
	}
	if len(v) > maxValueBytes {
		v = v[:maxValueBytes]
	}
	s := string(v)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}
