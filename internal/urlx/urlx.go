// Package urlx owns URL canonicalisation for crawlq: the one spelling of a URL that
// page-job uniqueness, politeness keys and allowed-domain checks are built on. Two links
// that reach the same resource the same way must canonicalise to the same string, and
// canonicalising a canonical URL must return it unchanged.
package urlx

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// MaxLen is the longest URL (input or canonical form) accepted, in bytes.
const MaxLen = 2048

var (
	// ErrScheme is returned for URLs whose scheme is not http or https
	// (file:, javascript:, mailto:, data:, ...).
	ErrScheme = errors.New("scheme not allowed")
	// ErrTooLong is returned for URLs longer than MaxLen bytes.
	ErrTooLong = errors.New("url too long")
	// ErrInvalid is returned for URLs that cannot be parsed or lack a host.
	ErrInvalid = errors.New("invalid url")
)

// idnaProfile maps Unicode hosts to ASCII the way browsers look them up, but without
// STD3 rules: real sites use underscores in host names and we must still crawl them.
var idnaProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false), idna.StrictDomainName(false))

// Canonical returns the canonical form of an absolute http(s) URL: lower-case scheme and
// host, IDNA (punycode) host, legacy IPv4 forms as dotted decimal, no default port, no
// fragment, dot segments resolved, percent-encoding normalised (unreserved characters
// decoded, other escapes upper-case), query parameters sorted by name (stable, so repeated
// names keep their order), empty query and empty path dropped / set to "/".
func Canonical(raw string) (string, error) {
	if len(raw) > MaxLen {
		return "", fmt.Errorf("canonicalise url: %d bytes: %w", len(raw), ErrTooLong)
	}
	raw = strings.TrimFunc(raw, isC0OrSpace)
	// Browsers drop tabs and newlines anywhere in a URL; so do we, so that an href split
	// over lines still names the same page.
	if strings.ContainsAny(raw, "\t\r\n") {
		raw = strings.NewReplacer("\t", "", "\r", "", "\n", "").Replace(raw)
	}
	u, err := url.Parse(fixPercents(raw))
	if err != nil {
		return "", fmt.Errorf("canonicalise url: %w: %v", ErrInvalid, trimErr(err))
	}
	return canonicalURL(u)
}

// Resolve resolves href against base (the final URL of the page it appeared on) and
// canonicalises the result. A nil base requires href to be absolute.
func Resolve(base *url.URL, href string) (string, error) {
	if len(href) > MaxLen {
		return "", fmt.Errorf("resolve url: %d bytes: %w", len(href), ErrTooLong)
	}
	href = strings.TrimFunc(href, isC0OrSpace)
	if strings.ContainsAny(href, "\t\r\n") {
		href = strings.NewReplacer("\t", "", "\r", "", "\n", "").Replace(href)
	}
	if base == nil {
		return Canonical(href)
	}
	ref, err := url.Parse(fixPercents(href))
	if err != nil {
		return "", fmt.Errorf("resolve url: %w: %v", ErrInvalid, trimErr(err))
	}
	return canonicalURL(base.ResolveReference(ref))
}

// Host returns the lower-case host of u with its port unless that port is the scheme's
// default (the key for politeness and robots.txt), or "" if u is not a valid http(s) URL.
func Host(u string) string {
	c, err := Canonical(u)
	if err != nil {
		return ""
	}
	p, err := url.Parse(c)
	if err != nil {
		return ""
	}
	return p.Host
}

// Hostname returns the host of u without any port, or "" if u is not a valid http(s) URL.
func Hostname(u string) string {
	c, err := Canonical(u)
	if err != nil {
		return ""
	}
	p, err := url.Parse(c)
	if err != nil {
		return ""
	}
	return p.Hostname()
}

// InDomains reports whether host (a hostname without port, as returned by Hostname) is
// one of domains or a subdomain of one of them, matching on label boundaries:
// "shop.example.com" is in "example.com", "badexample.com" is not. IP addresses only
// match exactly. An empty domains list matches nothing.
func InDomains(host string, domains []string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	for _, d := range domains {
		d = strings.TrimSuffix(strings.ToLower(d), ".")
		d = strings.TrimSuffix(strings.TrimPrefix(d, "["), "]")
		if d == "" {
			continue
		}
		if host == d {
			return true
		}
		if _, err := netip.ParseAddr(d); err == nil {
			continue
		}
		if strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

// IsLinkLocal reports whether host (a hostname or IP literal, without port) names a
// link-local or cloud metadata endpoint: 169.254.0.0/16, fe80::/10, fd00:ec2::254, or
// metadata.google.internal. Legacy IPv4 spellings (decimal, hex, octal) are recognised.
func IsLinkLocal(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(host)), ".")
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if h == "metadata.google.internal" || h == "metadata" {
		return true
	}
	if i := strings.IndexByte(h, '%'); i >= 0 { // IPv6 zone
		h = h[:i]
	}
	addr, err := netip.ParseAddr(h)
	if err != nil {
		v4, ok, err := parseLegacyIPv4(h)
		if err != nil || !ok {
			return false
		}
		addr = v4
	}
	addr = addr.Unmap()
	return addr.IsLinkLocalUnicast() || addr == netip.MustParseAddr("fd00:ec2::254")
}

func canonicalURL(u *url.URL) (string, error) {
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "http", "https":
	case "":
		return "", fmt.Errorf("canonicalise url: %w: not absolute", ErrInvalid)
	default:
		return "", fmt.Errorf("canonicalise url: scheme %q: %w", scheme, ErrScheme)
	}
	if u.Opaque != "" {
		return "", fmt.Errorf("canonicalise url: %w: no host", ErrInvalid)
	}
	host, err := canonicalHost(u.Hostname())
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n > 65535 {
			return "", fmt.Errorf("canonicalise url: %w: port %q", ErrInvalid, port)
		}
		port = strconv.Itoa(n)
		if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
			port = ""
		}
	}

	var b strings.Builder
	b.WriteString(scheme)
	b.WriteString("://")
	if u.User != nil {
		b.WriteString(normalizeEscapes(u.User.String(), userChar))
		b.WriteByte('@')
	}
	b.WriteString(host)
	if port != "" {
		b.WriteByte(':')
		b.WriteString(port)
	}
	path := removeDotSegments(normalizeEscapes(u.EscapedPath(), pathChar))
	if path == "" {
		path = "/"
	}
	b.WriteString(path)
	if q := canonicalQuery(u.RawQuery); q != "" {
		b.WriteByte('?')
		b.WriteString(q)
	}
	out := b.String()
	if len(out) > MaxLen {
		return "", fmt.Errorf("canonicalise url: %d bytes: %w", len(out), ErrTooLong)
	}
	return out, nil
}

func canonicalHost(h string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("canonicalise url: %w: no host", ErrInvalid)
	}
	if strings.Contains(h, ":") { // IPv6 literal (Hostname strips the brackets)
		zone := ""
		if i := strings.IndexByte(h, '%'); i >= 0 {
			h, zone = h[:i], h[i+1:]
		}
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is6() {
			return "", fmt.Errorf("canonicalise url: %w: host %q", ErrInvalid, h)
		}
		s := a.String()
		if zone != "" {
			s += "%25" + url.PathEscape(zone)
		}
		return "[" + s + "]", nil
	}
	lower := strings.ToLower(h)
	if v4, ok, err := parseLegacyIPv4(lower); err != nil {
		return "", fmt.Errorf("canonicalise url: %w: host %q: %v", ErrInvalid, h, err)
	} else if ok {
		return v4.String(), nil
	}
	ascii, err := idnaProfile.ToASCII(lower)
	if err != nil {
		return "", fmt.Errorf("canonicalise url: %w: host %q: %v", ErrInvalid, h, err)
	}
	ascii = strings.ToLower(ascii)
	if ascii == "" || ascii == "." {
		return "", fmt.Errorf("canonicalise url: %w: empty host", ErrInvalid)
	}
	for i := 0; i < len(ascii); i++ {
		if !hostChar(ascii[i]) {
			return "", fmt.Errorf("canonicalise url: %w: host %q", ErrInvalid, h)
		}
	}
	// A host that IDNA mapped into a numeric form (full-width digits) must be read as
	// an address too, or canonicalising the output would change it again.
	if v4, ok, err := parseLegacyIPv4(ascii); err != nil {
		return "", fmt.Errorf("canonicalise url: %w: host %q: %v", ErrInvalid, h, err)
	} else if ok {
		return v4.String(), nil
	}
	return ascii, nil
}

// parseLegacyIPv4 follows the WHATWG URL host parser: a host whose last label is numeric
// (decimal, 0x-hex or 0-octal) is an IPv4 address, in one to four parts. ok is false for
// ordinary host names.
func parseLegacyIPv4(h string) (addr netip.Addr, ok bool, err error) {
	parts := strings.Split(h, ".")
	if len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) == 0 {
		return netip.Addr{}, false, nil
	}
	if _, numeric := parseIPv4Number(parts[len(parts)-1]); !numeric {
		return netip.Addr{}, false, nil
	}
	if len(parts) > 4 {
		return netip.Addr{}, false, errors.New("too many IPv4 parts")
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, false, errors.New("non-numeric IPv4 part")
		}
		nums[i] = n
	}
	for _, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false, errors.New("IPv4 part out of range")
		}
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false, errors.New("IPv4 address out of range")
	}
	v := last
	for i, n := range nums[:len(nums)-1] {
		v += n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true, nil
}

func parseIPv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		s, base = s[2:], 16
		if s == "" {
			return 0, true
		}
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case base == 10 && c >= '0' && c <= '9':
		case base == 8 && c >= '0' && c <= '7':
		case base == 16 && (c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
		default:
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, base, 64)
	if err != nil { // overflow: numeric, but certainly out of range
		return 1 << 40, true
	}
	return n, true
}

func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	type param struct{ key, pair string }
	var params []param
	for _, p := range strings.Split(raw, "&") {
		if p == "" {
			continue
		}
		p = normalizeEscapes(p, queryChar)
		key, _, _ := strings.Cut(p, "=")
		params = append(params, param{key, p})
	}
	sort.SliceStable(params, func(i, j int) bool { return params[i].key < params[j].key })
	out := make([]string, len(params))
	for i, p := range params {
		out[i] = p.pair
	}
	return strings.Join(out, "&")
}

// normalizeEscapes decodes escapes of unreserved characters, upper-cases the hex of the
// others, escapes a '%' that starts no valid escape, and escapes every byte allowed()
// rejects.
func normalizeEscapes(s string, allowed func(byte) bool) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			v := unhex(s[i+1])<<4 | unhex(s[i+2])
			if unreserved(v) {
				b.WriteByte(v)
			} else {
				b.WriteByte('%')
				b.WriteByte(hex[v>>4])
				b.WriteByte(hex[v&15])
			}
			i += 2
			continue
		}
		if c != '%' && allowed(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// removeDotSegments implements RFC 3986 section 5.2.4 on an escaped path.
func removeDotSegments(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	r := strings.Join(out, "/")
	if strings.HasPrefix(p, "/") && !strings.HasPrefix(r, "/") {
		r = "/" + r
	}
	return r
}

func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func subDelim(c byte) bool { return strings.IndexByte("!$&'()*+,;=", c) >= 0 }

func pathChar(c byte) bool  { return unreserved(c) || subDelim(c) || c == ':' || c == '@' || c == '/' }
func queryChar(c byte) bool { return pathChar(c) && c != '&' || c == '?' }
func userChar(c byte) bool  { return unreserved(c) || subDelim(c) || c == ':' }
func hostChar(c byte) bool  { return unreserved(c) || c == '-' }

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// fixPercents escapes each '%' that starts no valid escape, as browsers tolerate them
// and url.Parse does not.
func fixPercents(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && !(i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2])) {
			b.WriteString("%25")
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isC0OrSpace(r rune) bool { return r <= ' ' }

// trimErr drops url.Error's repetition of the whole (possibly 2 KB) URL.
func trimErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
