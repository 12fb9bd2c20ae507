package demosite

import (
	"compress/gzip"
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The site's sitemap (sitemaps.org): an index at SitemapPath, named by robots.txt, whose gzipped
// children list the home page and the listings (pages.xml.gz) and the live items, SitemapSize
// each (items-N.xml.gz), every URL with the lastmod its page's Last-Modified also says.

const (
	// SitemapPath is the sitemap index.
	SitemapPath = "/sitemap.xml"
	sitemapDir  = "/sitemaps/"
)

type urlEntry struct {
	Loc     string `xml:"loc"`
	LastMod string `xml:"lastmod,omitempty"`
}

type urlSet struct {
	XMLName xml.Name   `xml:"http://www.sitemaps.org/schemas/sitemap/0.9 urlset"`
	URLs    []urlEntry `xml:"url"`
}

type sitemapIndex struct {
	XMLName  xml.Name   `xml:"http://www.sitemaps.org/schemas/sitemap/0.9 sitemapindex"`
	Sitemaps []urlEntry `xml:"sitemap"`
}

// sitemapChildren is how many items-N.xml.gz children the index lists.
func (s *Site) sitemapChildren() int {
	return (s.cfg.Items + s.cfg.SitemapSize - 1) / s.cfg.SitemapSize
}

func (s *Site) sitemap(w http.ResponseWriter, r *http.Request) {
	base := origin(r)
	path := r.URL.Path
	var doc any
	switch {
	case path == SitemapPath:
		idx := sitemapIndex{Sitemaps: []urlEntry{{Loc: base + sitemapDir + "pages.xml.gz", LastMod: lastmod(s.modTime(s.Generation()))}}}
		for i := 1; i <= s.sitemapChildren(); i++ {
			idx.Sitemaps = append(idx.Sitemaps, urlEntry{Loc: fmt.Sprintf("%s%sitems-%d.xml.gz", base, sitemapDir, i), LastMod: lastmod(s.modTime(s.Generation()))})
		}
		doc = idx
	case path == sitemapDir+"pages.xml.gz":
		set := urlSet{URLs: []urlEntry{{Loc: base + "/", LastMod: lastmod(s.modTime(0))}}}
		for n := 1; n <= s.listings; n++ {
			_, gen := s.listing(r, n)
			set.URLs = append(set.URLs, urlEntry{Loc: base + listingPath(n), LastMod: lastmod(s.modTime(gen))})
		}
		doc = set
	default:
		i, ok := number(path, sitemapDir+"items-", ".xml.gz")
		if !ok || i > s.sitemapChildren() {
			http.NotFound(w, r)
			return
		}
		var set urlSet
		s.mu.Lock()
		for k := (i-1)*s.cfg.SitemapSize + 1; k <= min(i*s.cfg.SitemapSize, s.cfg.Items); k++ {
			if !s.gen.deleted[k-1] {
				set.URLs = append(set.URLs, urlEntry{Loc: base + itemPath(k), LastMod: lastmod(s.gen.at[s.gen.changed[k-1]])})
			}
		}
		s.mu.Unlock()
		doc = set
	}
	var b strings.Builder
	b.WriteString(xml.Header)
	if err := xml.NewEncoder(&b).Encode(doc); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if !strings.HasSuffix(path, ".gz") {
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, b.String())
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	zw := gzip.NewWriter(w)
	fmt.Fprint(zw, b.String())
	_ = zw.Close()
}

// lastmod is t as a sitemap lastmod, to the nanosecond (W3C datetimes allow fractions): a
// generation made within the second a crawl started must still read as later.
func lastmod(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
