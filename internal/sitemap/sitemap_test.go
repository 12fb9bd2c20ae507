package sitemap

import (
	"bytes"
	"compress/gzip"
	"errors"
	"testing"
	"time"
)

func TestParseIndexAndGzippedURLSet(t *testing.T) {
	idx, err := Parse([]byte(`<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc> http://x/a.xml.gz </loc><lastmod>2026-01-02</lastmod></sitemap>
  <sitemap><loc>http://x/b.xml</loc></sitemap>
</sitemapindex>`))
	if err != nil || !idx.Index || len(idx.Children) != 2 || idx.Children[0].Loc != "http://x/a.xml.gz" ||
		!idx.Children[0].LastMod.Equal(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("index = %+v, %v", idx, err)
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://x/1</loc><lastmod>2026-01-01T10:00:00.5+01:00</lastmod></url><url><loc>http://x/2</loc></url><url><lastmod>2026-01-01</lastmod></url></urlset>`))
	zw.Close()
	set, err := Parse(b.Bytes())
	if err != nil || set.Index || len(set.URLs) != 2 {
		t.Fatalf("urlset = %+v, %v", set, err)
	}
	since := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	if !set.URLs[0].Newer(since) || set.URLs[0].Newer(since.Add(time.Hour)) || !set.URLs[1].Newer(since) {
		t.Errorf("Newer: %+v", set.URLs)
	}
	if _, err := Parse([]byte(`<html><body>no</body></html>`)); !errors.Is(err, ErrNotSitemap) {
		t.Errorf("an HTML page: %v, want ErrNotSitemap", err)
	}
}
