package spider

import (
	"fmt"

	"crawlq/internal/urlx"
)

// SinceLastRun is the sitemaps' since value that schedules only the sitemap URLs whose lastmod is
// later than the start of the spider's last succeeded run.
const SinceLastRun = "last_run"

// SitemapSpec is the spec's sitemaps block: sitemaps (or sitemap indexes, gzipped or not) whose
// URLs are start points of every run, besides start_urls.
type SitemapSpec struct {
	URLs []string `yaml:"urls"` // absolute http(s) URLs of sitemaps or sitemap indexes
	// FromRobots also reads the Sitemap: lines of the robots.txt of each start URL's site.
	FromRobots bool `yaml:"from_robots"`
	// Since is "" (every URL a sitemap lists) or "last_run" (only those whose lastmod is later
	// than the start of the last succeeded run; all of them on a first run).
	Since string `yaml:"since"`
}

func (s *SitemapSpec) validate() []FieldError {
	if s == nil {
		return nil
	}
	var errs []FieldError
	add := func(path, format string, a ...any) {
		errs = append(errs, FieldError{Path: path, Msg: fmt.Sprintf(format, a...)})
	}
	if len(s.URLs) == 0 && !s.FromRobots {
		add("sitemaps", "needs urls or from_robots: true")
	}
	for i, raw := range s.URLs {
		if _, err := urlx.Canonical(raw); err != nil {
			add(fmt.Sprintf("sitemaps.urls[%d]", i), "%q is not an absolute http(s) URL", truncate(raw))
		}
	}
	switch s.Since {
	case "", SinceLastRun:
	default:
		add("sitemaps.since", "%q is not last_run (or left out: every URL)", truncate(s.Since))
	}
	return errs
}

// sitemapSettings fills the sitemap fields of st from a valid spec.
func (s *Spec) sitemapSettings(st *Settings) {
	if s.Sitemaps == nil {
		return
	}
	for _, raw := range s.Sitemaps.URLs {
		c, _ := urlx.Canonical(raw) // validated
		st.Sitemaps = append(st.Sitemaps, c)
	}
	st.SitemapsFromRobots, st.SitemapSince = s.Sitemaps.FromRobots, s.Sitemaps.Since
}
