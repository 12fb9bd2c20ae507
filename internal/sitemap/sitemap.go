// Package sitemap reads sitemaps (sitemaps.org): a urlset's URLs with their lastmod, or a
// sitemap index's child sitemaps, from XML or gzipped XML. It fetches nothing; internal/crawl
// fetches the files as page jobs and turns what this package reads into more of them.
//
// It is encoding/xml's streaming decoder over the two elements the protocol has: the Go
// sitemap parsers one could import are small, unmaintained, and read the same elements the
// same way.
package sitemap

import (
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// MaxBytes bounds a sitemap's decompressed size (the protocol's limit is 50 MB).
const MaxBytes = 50 << 20

// ErrNotSitemap is returned for a document that is neither a urlset nor a sitemapindex.
var ErrNotSitemap = errors.New("not a sitemap")

// Entry is one <url> of a urlset or one <sitemap> of an index.
type Entry struct {
	Loc     string
	LastMod time.Time // zero when absent or unreadable
}

// Sitemap is a parsed sitemap file: either URLs (a urlset) or Children (an index).
type Sitemap struct {
	Index    bool
	URLs     []Entry
	Children []Entry
}

// Parse reads a sitemap from body, gunzipping it when it is gzipped (by its magic bytes, since
// servers send .xml.gz as application/gzip or as application/xml alike).
func Parse(body []byte) (*Sitemap, error) {
	var r io.Reader = bytes.NewReader(body)
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("sitemap: gunzip: %w", err)
		}
		defer zr.Close()
		r = zr
	}
	lr := &io.LimitedReader{R: r, N: MaxBytes + 1}
	dec := xml.NewDecoder(lr)
	dec.Strict = false
	sm := &Sitemap{}
	root := ""
	var cur *Entry
	var field string
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("sitemap: %w", err)
		}
		if lr.N <= 0 {
			return nil, fmt.Errorf("sitemap: larger than %d bytes decompressed", MaxBytes)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			switch {
			case root == "":
				root = name
				if name != "urlset" && name != "sitemapindex" {
					return nil, fmt.Errorf("sitemap: root element <%s>: %w", name, ErrNotSitemap)
				}
				sm.Index = name == "sitemapindex"
			case name == "url" || name == "sitemap":
				cur = &Entry{}
			case cur != nil && (name == "loc" || name == "lastmod"):
				field = name
				text.Reset()
			}
		case xml.CharData:
			if field != "" {
				text.Write(t)
			}
		case xml.EndElement:
			name := t.Name.Local
			switch {
			case cur != nil && name == field:
				v := strings.TrimSpace(text.String())
				if field == "loc" {
					cur.Loc = v
				} else {
					cur.LastMod = parseLastMod(v)
				}
				field = ""
			case cur != nil && (name == "url" || name == "sitemap"):
				if cur.Loc != "" {
					if sm.Index {
						sm.Children = append(sm.Children, *cur)
					} else {
						sm.URLs = append(sm.URLs, *cur)
					}
				}
				cur = nil
			}
		}
	}
	if root == "" {
		return nil, fmt.Errorf("sitemap: empty document: %w", ErrNotSitemap)
	}
	return sm, nil
}

// parseLastMod reads a W3C datetime (the forms sitemaps use), or returns the zero time.
func parseLastMod(s string) time.Time {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02", "2006-01", "2006"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}

// Newer reports whether an entry may have changed after since: its lastmod is later, or it has
// none (nothing says it did not).
func (e Entry) Newer(since time.Time) bool {
	return e.LastMod.IsZero() || e.LastMod.After(since)
}
