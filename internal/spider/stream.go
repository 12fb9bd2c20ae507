package spider

import (
	"bytes"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// The streaming path reads a page's tokens once (golang.org/x/net/html's Tokenizer, the one the
// DOM parser uses) and extracts links and fields as the elements open and close, without
// building a tree: on the bench site it costs a fraction of goquery's parse.
//
// It must find exactly what the DOM path finds, so it models the HTML tree construction only
// where the tree is the plain nesting of the tags (with the implied html, head and body of the
// standard), and gives up, leaving the page to the DOM path, wherever the standard would move,
// close or reopen elements on its own: an end tag that does not close the current element, a
// block opened inside a <p>, a second <li> in an open <li>, nested <a>, tables, forms, select,
// foreign content (svg, math), templates, frames, and any other known element it does not
// model. Unknown (custom) elements are ordinary, as in the standard. A differential test and a
// fuzz target (stream_test.go) compare both paths.

// streamPlan is a spider's selectors compiled for the streaming path.
type streamPlan struct {
	comps  []compound
	base   selGroup   // base[href]
	links  selGroup   // a[href], area[href]
	follow []selGroup // per follow rule; nil: every link
	items  []selGroup // per item rule container; nil: the document
	fields [][]selGroup
	fattrs [][]string // per item rule, per field: "text" or an attribute name
}

// maxStreamDepth stays below the DOM parser's limit of 512 open elements, so a page that
// nests that deep is left to the parser, which reports it.
const maxStreamDepth = 480

// compileStream returns the plan for d, or nil when a selector or field needs the DOM.
func compileStream(spec *Spec) *streamPlan {
	p := &streamPlan{}
	sel := func(s string) (selGroup, bool) {
		if s == "" {
			return nil, true
		}
		return parseSimple(s, &p.comps)
	}
	var ok bool
	p.base, _ = parseSimple("base[href]", &p.comps)
	p.links, _ = parseSimple("a[href], area[href]", &p.comps)
	for _, f := range spec.Follow {
		g, ok := sel(f.CSS)
		if !ok {
			return nil
		}
		p.follow = append(p.follow, g)
	}
	for _, it := range spec.Items {
		var g selGroup
		if g, ok = sel(it.CSS); !ok {
			return nil
		}
		p.items = append(p.items, g)
		var fs []selGroup
		var as []string
		for _, name := range sortedKeys(it.Fields) {
			f := it.Fields[name]
			if f.Attr == "html" {
				return nil // inner HTML is a serialisation of the tree
			}
			fg, ok := sel(f.CSS)
			if !ok {
				return nil
			}
			fs = append(fs, fg)
			attr := f.Attr
			if attr == "" {
				attr = "text"
			}
			as = append(as, attr)
		}
		p.fields = append(p.fields, fs)
		p.fattrs = append(p.fattrs, as)
	}
	if len(p.comps) > 64 {
		return nil // an open element keeps its matches in a uint64
	}
	return p
}

type insertionMode int

const (
	beforeHTML insertionMode = iota
	beforeHead
	inHead
	afterHead
	inBody
	afterBody
	afterAfterBody
)

type openElem struct {
	atom     atom.Atom
	name     string // only for elements without an atom
	bits     uint64 // the compounds it matches
	hasChild bool   // for the newline a <pre> drops
}

// capture collects one field's raw text, or a follow rule match's hrefs, while its element is
// open.
type capture struct {
	depth int // len(stack) while its element is open; 0 for the document
	buf   *[]byte
	text  *rawField // gets buf when the element closes
	hrefs *[]string
}

// container is an open or closed item container.
type container struct {
	rule   int
	depth  int // len(stack) while open; 0 for the document
	fields []rawField
	hit    []bool // the field's first match was seen
}

type streamer struct {
	p        *streamPlan
	z        *html.Tokenizer
	mode     insertionMode
	stack    []openElem
	attrs    []tokenAttr
	caps     []capture
	pOpen    int // open <p> elements
	aOpen    int
	btnOpen  int
	data     *pageData
	items    [][]*container // per item rule, in document order
	openC    []*container   // containers still open (or the document)
	followBy [][]*[]string  // per follow rule with a selector: the hrefs of each match, in match order
	active   []bool         // item rules that apply to this page
	name     []byte         // the current tag's lower-cased name (tagName)
}

// extract reads page data from body, or reports false when the page needs the DOM path.
// activeItems says which item rules apply to the page's URL.
func (p *streamPlan) extract(body []byte, activeItems []bool) (*pageData, bool) {
	if bytes.IndexByte(body, 0) >= 0 {
		return nil, false // the parser drops or replaces NULs depending on where they are
	}
	s := &streamer{p: p, z: html.NewTokenizer(bytes.NewReader(body)), active: activeItems}
	s.data = &pageData{links: make([][]string, len(p.follow)), items: make([][][]rawField, len(p.items))}
	s.items = make([][]*container, len(p.items))
	s.followBy = make([][]*[]string, len(p.follow))
	for r, g := range p.items {
		if g == nil && activeItems[r] {
			c := s.newContainer(r, 0)
			s.items[r] = append(s.items[r], c)
			for f, fg := range p.fields[r] {
				if fg == nil {
					c.hit[f] = true
					s.fieldFrom(&c.fields[f], p.fattrs[r][f], 0)
				}
			}
			s.openC = append(s.openC, c)
		}
	}
	if !s.run() {
		return nil, false
	}
	for _, c := range s.caps {
		if c.text != nil {
			c.text.v = string(*c.buf)
		}
	}
	for r, cs := range s.items {
		for _, c := range cs {
			s.data.items[r] = append(s.data.items[r], c.fields)
		}
	}
	for r, g := range p.follow {
		if g == nil {
			continue
		}
		for _, hs := range s.followBy[r] {
			s.data.links[r] = append(s.data.links[r], (*hs)...)
		}
	}
	return s.data, true
}

func (s *streamer) newContainer(rule, depth int) *container {
	n := len(s.p.fields[rule])
	return &container{rule: rule, depth: depth, fields: make([]rawField, n), hit: make([]bool, n)}
}

func (s *streamer) run() bool {
	for {
		tt := s.z.Next()
		switch tt {
		case html.ErrorToken:
			return s.eof()
		case html.TextToken:
			if !s.text(s.z.Text()) {
				return false
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name := s.tagName()
			s.attrs = s.attrs[:0]
			for more := true; more; {
				var k, v []byte
				if k, v, more = s.z.TagAttr(); k == nil {
					break // no attributes: the tokenizer keeps none with an empty key
				}
				s.attrs = append(s.attrs, tokenAttr{k, v})
			}
			if !s.start(name) {
				return false
			}
		case html.EndTagToken:
			if !s.end(s.tagName()) {
				return false
			}
		}
		// Comments and doctypes add nothing a selector or text sees; a comment in a <pre>
		// does make it non-empty, as far as the dropped newline goes.
		if tt == html.CommentToken && len(s.stack) > 0 {
			s.stack[len(s.stack)-1].hasChild = true
		}
	}
}

// tagName returns the current tag token's name, lower-cased, in a buffer reused for every tag.
// The tokenizer's TagName copies the name to replace NULs, one allocation per tag (an eighth of
// a page's); a body with a NUL never streams (extract), so the name is read from the raw token
// as the tokenizer's readTagName delimits it: after "<" or "</", up to white space, "/" or ">".
func (s *streamer) tagName() []byte {
	raw := s.z.Raw()
	i := 1 // "<"
	if len(raw) > 1 && raw[1] == '/' {
		i = 2
	}
	j := i
	for j < len(raw) {
		c := raw[j]
		if c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == '/' || c == '>' {
			break
		}
		j++
	}
	s.name = s.name[:0]
	for _, c := range raw[min(i, len(raw)):j] {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		s.name = append(s.name, c)
	}
	return s.name
}

func (s *streamer) top() *openElem {
	if len(s.stack) == 0 {
		return nil
	}
	return &s.stack[len(s.stack)-1]
}

func isRawText(a atom.Atom) bool { return a == atom.Title || a == atom.Script || a == atom.Style }

const htmlSpace = " \t\r\n\f"

func (s *streamer) text(d []byte) bool {
	if t := s.top(); t != nil && isRawText(t.atom) {
		s.insertText(d)
		return true
	}
	for {
		switch s.mode {
		case beforeHTML, beforeHead:
			d = bytes.TrimLeft(d, htmlSpace)
			if len(d) == 0 {
				return true
			}
			if !s.implied() {
				return false
			}
		case inHead, afterHead:
			rest := bytes.TrimLeft(d, htmlSpace)
			s.insertText(d[:len(d)-len(rest)])
			if len(rest) == 0 {
				return true
			}
			d = rest
			if !s.implied() {
				return false
			}
		case inBody:
			t := s.top()
			if (t.atom == atom.Pre || t.atom == atom.Listing) && !t.hasChild {
				d = bytes.TrimPrefix(d, []byte("\r"))
				d = bytes.TrimPrefix(d, []byte("\n"))
			}
			if len(d) > 0 {
				t.hasChild = true
				s.insertText(d)
			}
			return true
		default: // after body: only whitespace, which goes to the body
			if len(bytes.TrimLeft(d, htmlSpace)) > 0 || s.top().atom != atom.Body {
				return false
			}
			s.insertText(d)
			return true
		}
	}
}

// implied opens the element the current mode implies before other content: html, head (or
// closes it) or body.
func (s *streamer) implied() bool {
	s.attrs = s.attrs[:0]
	switch s.mode {
	case beforeHTML:
		s.mode = beforeHead
		return s.open(atom.Html, nil)
	case beforeHead:
		s.mode = inHead
		return s.open(atom.Head, nil)
	case inHead:
		s.mode = afterHead
		s.pop()
		return true
	case afterHead:
		s.mode = inBody
		return s.open(atom.Body, nil)
	}
	return false
}

func (s *streamer) insertText(d []byte) {
	if len(d) == 0 {
		return
	}
	for _, c := range s.caps {
		if c.buf != nil {
			*c.buf = append(*c.buf, d...)
		}
	}
}

func (s *streamer) eof() bool {
	if t := s.top(); t != nil && isRawText(t.atom) {
		s.pop()
	}
	for s.mode < inBody {
		if !s.implied() {
			return false
		}
	}
	return true
}

// phrasing are elements the parser inserts as they come (formatting or "any other start tag")
// and that do not close an open <p>.
var phrasing = map[atom.Atom]bool{
	atom.Abbr: true, atom.B: true, atom.Bdi: true, atom.Bdo: true, atom.Big: true, atom.Cite: true,
	atom.Code: true, atom.Data: true, atom.Del: true, atom.Dfn: true, atom.Em: true, atom.Font: true,
	atom.I: true, atom.Ins: true, atom.Kbd: true, atom.Label: true, atom.Mark: true, atom.Q: true,
	atom.S: true, atom.Samp: true, atom.Small: true, atom.Span: true, atom.Strike: true,
	atom.Strong: true, atom.Sub: true, atom.Sup: true, atom.Time: true, atom.Tt: true, atom.U: true,
	atom.Var: true, atom.Picture: true, atom.Output: true, atom.Meter: true, atom.Progress: true,
	atom.Canvas: true, atom.Audio: true, atom.Video: true, atom.Slot: true,
}

// voids are inserted and closed at once.
var voids = map[atom.Atom]bool{
	atom.Area: true, atom.Br: true, atom.Embed: true, atom.Img: true, atom.Wbr: true, atom.Input: true,
	atom.Param: true, atom.Source: true, atom.Track: true, atom.Meta: true, atom.Link: true, atom.Base: true,
}

// blocks close an open <p> (the stream gives up on that instead).
var blocks = map[atom.Atom]bool{
	atom.Address: true, atom.Article: true, atom.Aside: true, atom.Blockquote: true, atom.Center: true,
	atom.Details: true, atom.Dialog: true, atom.Dir: true, atom.Div: true, atom.Dl: true,
	atom.Fieldset: true, atom.Figcaption: true, atom.Figure: true, atom.Footer: true, atom.Header: true,
	atom.Hgroup: true, atom.Main: true, atom.Menu: true, atom.Nav: true, atom.Ol: true, atom.P: true,
	atom.Search: true, atom.Section: true, atom.Summary: true, atom.Ul: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Pre: true, atom.Listing: true, atom.Li: true, atom.Dd: true, atom.Dt: true, atom.Hr: true,
}

// special is the parser's isSpecialElementMap (HTML namespace), for the <li>/<dd> scope walk.
var special = map[atom.Atom]bool{}

func init() {
	for _, n := range strings.Fields(`address applet area article aside base basefont bgsound blockquote
		body br button caption center col colgroup dd details dir div dl dt embed fieldset figcaption
		figure footer form frame frameset h1 h2 h3 h4 h5 h6 head header hgroup hr html iframe img input
		keygen li link listing main marquee menu meta nav noembed noframes noscript object ol p param
		plaintext pre script section select source style summary table tbody td template textarea
		tfoot th thead title tr track ul wbr xmp`) {
		special[atom.Lookup([]byte(n))] = true
	}
}

func isHeading(a atom.Atom) bool {
	return a == atom.H1 || a == atom.H2 || a == atom.H3 || a == atom.H4 || a == atom.H5 || a == atom.H6
}

func (s *streamer) start(name []byte) bool {
	a := atom.Lookup(name)
	for {
		switch s.mode {
		case beforeHTML:
			if a == atom.Html {
				s.mode = beforeHead
				return s.open(a, name)
			}
			if !s.impliedKeep() {
				return false
			}
		case beforeHead:
			if a == atom.Head {
				s.mode = inHead
				return s.open(a, name)
			}
			if a == atom.Html {
				return false
			}
			if !s.impliedKeep() {
				return false
			}
		case inHead:
			switch a {
			case atom.Title, atom.Script, atom.Style:
				return s.open(a, name)
			case atom.Meta, atom.Link, atom.Base:
				return s.openVoid(a, name)
			case atom.Html, atom.Head, atom.Noscript, atom.Template, atom.Basefont, atom.Bgsound, atom.Noframes:
				return false
			}
			s.impliedKeep()
		case afterHead:
			switch a {
			case atom.Body:
				s.mode = inBody
				return s.open(a, name)
			case atom.Html, atom.Head, atom.Frameset, atom.Base, atom.Basefont, atom.Bgsound, atom.Link,
				atom.Meta, atom.Noframes, atom.Script, atom.Style, atom.Template, atom.Title:
				return false
			}
			if !s.impliedKeep() {
				return false
			}
		case inBody:
			return s.startInBody(a, name)
		default:
			return false
		}
	}
}

// impliedKeep runs implied with the current token's attributes set aside.
func (s *streamer) impliedKeep() bool {
	attrs := s.attrs
	s.attrs = nil
	ok := s.implied()
	s.attrs = attrs
	return ok
}

// startInBody opens element a in the body, or returns false where the HTML parser would do
// more than open it (close or reopen an element, reparent one): the page is then parsed as a
// DOM instead.
func (s *streamer) startInBody(a atom.Atom, name []byte) bool {
	switch {
	case a == 0 || phrasing[a]:
		return s.open(a, name)
	case a == atom.A:
		return s.aOpen == 0 && s.open(a, name) // a nested <a> closes the open one
	case a == atom.Title || a == atom.Script || a == atom.Style:
		return s.open(a, name)
	case voids[a]:
		return s.openVoid(a, name)
	case a == atom.Button:
		return s.btnOpen == 0 && s.open(a, name) // a nested <button> closes the open one
	case blocks[a]:
		return s.startBlock(a, name)
	}
	return false
}

// openVoid opens and at once closes element a, which has no content.
func (s *streamer) openVoid(a atom.Atom, name []byte) bool {
	if !s.open(a, name) {
		return false
	}
	s.pop()
	return true
}

// startBlock opens block element a, unless it would close an open element: a <p>, a heading
// (another heading), or a list item (closesListItem).
func (s *streamer) startBlock(a atom.Atom, name []byte) bool {
	if s.pOpen > 0 || isHeading(a) && isHeading(s.top().atom) || s.closesListItem(a) {
		return false
	}
	if a == atom.Hr {
		return s.openVoid(a, name)
	}
	return s.open(a, name)
}

// closesListItem reports whether a, an <li>, <dd> or <dt>, would close one open in its scope:
// the parser's walk down the stack of open elements, up to a special element other than
// address, div and p.
func (s *streamer) closesListItem(a atom.Atom) bool {
	if a != atom.Li && a != atom.Dd && a != atom.Dt {
		return false
	}
	for i := len(s.stack) - 1; i >= 0; i-- {
		e := s.stack[i].atom
		if e == atom.Li && a == atom.Li || (e == atom.Dd || e == atom.Dt) && a != atom.Li {
			return true
		}
		if special[e] && e != atom.Address && e != atom.Div && e != atom.P {
			return false
		}
	}
	return false
}

func (s *streamer) end(name []byte) bool {
	a := atom.Lookup(name)
	t := s.top()
	switch {
	case a == atom.Head:
		if s.mode != inHead || t.atom != atom.Head {
			return false
		}
		s.pop()
		s.mode = afterHead
		return true
	case a == atom.Body:
		if s.mode != inBody || t.atom != atom.Body {
			return false
		}
		s.mode = afterBody
		return true
	case a == atom.Html:
		if s.mode == inBody && t.atom == atom.Body || s.mode == afterBody {
			s.mode = afterAfterBody
			return true
		}
		return false
	case a == atom.Br || t == nil || s.mode >= afterBody:
		return false
	}
	if t.atom != a || a == 0 && t.name != string(name) {
		return false
	}
	s.pop()
	return true
}

// open pushes an element, working out the compounds it matches and what it starts: item
// containers, field values, follow matches, hrefs.
func (s *streamer) open(a atom.Atom, name []byte) bool {
	if len(s.stack) >= maxStreamDepth {
		return false
	}
	if name == nil {
		name = []byte(a.String())
	}
	if t := s.top(); t != nil {
		t.hasChild = true
	}
	bits := s.compoundsMatching(name)
	depth := len(s.stack) + 1
	s.startFields(bits, depth)
	s.startContainers(bits, depth)
	if s.data.base == nil && s.matchGroup(s.p.base, bits) {
		v := string(s.attr("href"))
		s.data.base = &v
	}
	isLink := s.matchGroup(s.p.links, bits)
	s.startFollows(bits, depth, isLink)
	if isLink {
		s.hrefToCaptures(depth)
	}
	s.push(a, name, bits)
	return true
}

// compoundsMatching is the set of the parse's compound selectors the element name, with the
// current attributes, matches: bit i for compound i.
func (s *streamer) compoundsMatching(name []byte) uint64 {
	var bits uint64
	for i := range s.p.comps {
		if s.p.comps[i].matches(name, s.attrs) {
			bits |= 1 << i
		}
	}
	return bits
}

// startFields takes the field values this element starts in the containers already open (it is
// inside them).
func (s *streamer) startFields(bits uint64, depth int) {
	for _, c := range s.openC {
		r := c.rule
		for f, g := range s.p.fields[r] {
			if g == nil || c.hit[f] || !s.matchGroup(g, bits) {
				continue
			}
			c.hit[f] = true
			s.fieldFrom(&c.fields[f], s.p.fattrs[r][f], depth)
		}
	}
}

// startContainers opens the item containers this element starts, with the fields read from the
// container itself.
func (s *streamer) startContainers(bits uint64, depth int) {
	for r, g := range s.p.items {
		if g == nil || !s.active[r] || !s.matchGroup(g, bits) {
			continue
		}
		c := s.newContainer(r, depth)
		s.items[r] = append(s.items[r], c)
		for f, fg := range s.p.fields[r] {
			if fg == nil {
				c.hit[f] = true
				s.fieldFrom(&c.fields[f], s.p.fattrs[r][f], depth)
			}
		}
		s.openC = append(s.openC, c)
	}
}

// startFollows records the follow rules this element matches: its href, or a capture of the
// links inside it; a rule without a selector takes every link.
func (s *streamer) startFollows(bits uint64, depth int, isLink bool) {
	for r, g := range s.p.follow {
		if g == nil {
			if isLink {
				s.data.links[r] = append(s.data.links[r], string(s.attr("href")))
			}
			continue
		}
		if !s.matchGroup(g, bits) {
			continue
		}
		hs := new([]string)
		s.followBy[r] = append(s.followBy[r], hs)
		if v, ok := s.attrOK("href"); ok {
			*hs = append(*hs, string(v))
			continue
		}
		s.caps = append(s.caps, capture{depth: depth, hrefs: hs})
	}
}

// hrefToCaptures adds this link's href to the follow captures open around it.
func (s *streamer) hrefToCaptures(depth int) {
	var v string
	got := false
	for _, c := range s.caps {
		if c.hrefs != nil && c.depth < depth {
			if !got {
				v, got = string(s.attr("href")), true
			}
			*c.hrefs = append(*c.hrefs, v)
		}
	}
}

// push puts the element on the stack and counts the open elements the parse's nesting rules
// watch.
func (s *streamer) push(a atom.Atom, name []byte, bits uint64) {
	e := openElem{atom: a, bits: bits}
	if a == 0 {
		e.name = string(name)
	}
	s.stack = append(s.stack, e)
	switch {
	case a == atom.P:
		s.pOpen++
	case a == atom.A:
		s.aOpen++
	case a == atom.Button:
		s.btnOpen++
	}
}

func (s *streamer) fieldFrom(f *rawField, attr string, depth int) {
	if attr == "text" {
		f.ok = true
		s.caps = append(s.caps, capture{depth: depth, buf: new([]byte), text: f})
		return
	}
	v, ok := s.attrOK(attr)
	f.v, f.ok = string(v), ok
}

func (s *streamer) attr(key string) []byte {
	v, _ := s.attrOK(key)
	return v
}

// attrOK returns the first attribute named key, as goquery's Attr does.
func (s *streamer) attrOK(key string) ([]byte, bool) {
	for _, a := range s.attrs {
		if string(a.key) == key {
			return a.val, true
		}
	}
	return nil, false
}

func (s *streamer) pop() {
	depth := len(s.stack)
	e := s.stack[depth-1]
	s.stack = s.stack[:depth-1]
	switch e.atom {
	case atom.P:
		s.pOpen--
	case atom.A:
		s.aOpen--
	case atom.Button:
		s.btnOpen--
	}
	caps := s.caps[:0]
	for _, c := range s.caps {
		if c.depth != depth {
			caps = append(caps, c)
		} else if c.text != nil {
			c.text.v = string(*c.buf)
		}
	}
	s.caps = caps
	open := s.openC[:0]
	for _, c := range s.openC {
		if c.depth != depth {
			open = append(open, c)
		}
	}
	s.openC = open
}

// matchGroup reports whether the element about to be pushed (matching bits) matches g, given
// the open elements above it.
func (s *streamer) matchGroup(g selGroup, bits uint64) bool {
	for _, c := range g {
		last := len(c.parts) - 1
		if bits&(1<<c.parts[last]) == 0 {
			continue
		}
		if last == 0 || s.matchUp(c, last-1, len(s.stack)-1) {
			return true
		}
	}
	return false
}

// matchUp reports whether parts[:i+1] match ancestors at or above stack index top, the part
// i joined to part i+1 by child[i].
func (s *streamer) matchUp(c complexSel, i, top int) bool {
	bit := uint64(1) << c.parts[i]
	if c.child[i] {
		if top < 0 || s.stack[top].bits&bit == 0 {
			return false
		}
		return i == 0 || s.matchUp(c, i-1, top-1)
	}
	for j := top; j >= 0; j-- {
		if s.stack[j].bits&bit != 0 && (i == 0 || s.matchUp(c, i-1, j-1)) {
			return true
		}
	}
	return false
}
