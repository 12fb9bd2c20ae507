package spider

import (
	"strings"
	"testing"
	"time"
)

// A bad revisit value or interval is refused naming its field.
func TestRevisitFieldsAreChecked(t *testing.T) {
	base := "name: r\nstart_urls: [\"http://example.com/\"]\n"
	for _, tc := range []struct{ yaml, want string }{
		{"revisit: sometimes\n", `revisit: "sometimes" is not one of always, changed_only, adaptive`},
		{"revisit: adaptive\nrevisit_interval: {min: soon}\n", "revisit_interval.min: \"soon\" is not a duration"},
		{"revisit: adaptive\nrevisit_interval: {min: 2h, max: 1h}\n", "revisit_interval: min 2h0m0s is more than max 1h0m0s"},
		{"revisit: changed_only\nrevisit_interval: {max: 1h}\n", "revisit_interval: needs revisit: adaptive"},
		{"state_ttl: -1h\n", "state_ttl: negative"},
	} {
		_, err := ParseSpec([]byte(base+tc.yaml), "r.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v; want one containing %q", tc.yaml, err, tc.want)
		}
	}
	spec, err := ParseSpec([]byte(base+"revisit: adaptive\nrevisit_interval: {min: 10m}\nstate_ttl: 48h\n"), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := spec.Settings()
	lo, hi := st.RevisitBounds()
	if st.Revisit != RevisitAdaptive || lo != 10*time.Minute || hi != DefaultRevisitMax || st.StateKeep() != 48*time.Hour || !st.KeepsState() {
		t.Errorf("settings %+v, bounds %s..%s", st, lo, hi)
	}
}

// The state line follows what a spec extracts, not the rest of it.
func TestStateLineFollowsExtraction(t *testing.T) {
	line := func(y string) string {
		spec, err := ParseSpec([]byte(y), "l.yaml")
		if err != nil {
			t.Fatal(err)
		}
		sp, err := Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		return StateLine(sp)
	}
	a := line("name: l\nstart_urls: [\"http://example.com/\"]\nitems: [{key: k, fields: {k: {css: h1}}}]\n")
	b := line("name: l\nstart_urls: [\"http://example.com/\"]\ndelay: 1s\nitems: [{key: k, fields: {k: {css: h1}}}]\n")
	c := line("name: l\nstart_urls: [\"http://example.com/\"]\nitems: [{key: k, fields: {k: {css: h2}}}]\n")
	if a == "" || a != b || a == c {
		t.Errorf("lines %q %q %q: want the first two equal and the third not", a, b, c)
	}
}

// A bad sitemaps block is refused naming its field.
func TestSitemapsAreChecked(t *testing.T) {
	base := "name: r\nstart_urls: [\"http://example.com/\"]\n"
	for _, tc := range []struct{ yaml, want string }{
		{"sitemaps: {since: last_run}\n", "sitemaps: needs urls or from_robots: true"},
		{"sitemaps: {urls: [\"ftp://x/s.xml\"]}\n", `sitemaps.urls[0]: "ftp://x/s.xml" is not an absolute http(s) URL`},
		{"sitemaps: {from_robots: true, since: yesterday}\n", `sitemaps.since: "yesterday" is not last_run`},
	} {
		_, err := ParseSpec([]byte(base+tc.yaml), "r.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v; want one containing %q", tc.yaml, err, tc.want)
		}
	}
	spec, err := ParseSpec([]byte(base+"sitemaps: {urls: [\"HTTP://example.com/s.xml\"], from_robots: true, since: last_run}\n"), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := spec.Settings()
	if len(st.Sitemaps) != 1 || st.Sitemaps[0] != "http://example.com/s.xml" || !st.SitemapsFromRobots || st.SitemapSince != SinceLastRun {
		t.Errorf("settings %+v", st)
	}
}
