package spider_test

import (
	"strings"
	"testing"

	"crawlq/internal/spider"
)

// render: browser is checked when a spec is read: its wait_for, that it runs on the runners
// (runtime ecs, its default; lambda is refused with the reason), and that wait_for and scroll
// are not given to a spider that does not render.
func TestRenderSettingsAreChecked(t *testing.T) {
	base := "name: r\nstart_urls: [https://example.com/]\n"
	for _, tc := range []struct {
		spec, field string // field: the path the error names, "" for a valid spec
	}{
		{"render: browser\nwait_for: div.product\nscroll: true\n", ""},
		{"render: browser\nwait_for: networkidle\nruntime: ecs\n", ""},
		{"render: browser\nwait_for: 2s\n", ""},
		{"render: browser\nruntime: lambda\n", "render"},
		{"render: browser\nwait_for: 'div[unclosed'\n", "wait_for"},
		{"render: browser\nwait_for: -1s\n", "wait_for"},
		{"render: chrome\n", "render"},
		{"wait_for: networkidle\n", "wait_for"},
		{"render: http\nscroll: true\n", "scroll"},
		{"follow: [{css: a, render: browser}]\nwait_for: networkidle\n", ""},
		{"follow: [{css: a, render: chrome}]\n", "follow[0].render"},
		{"runtime: lambda\nfollow: [{css: a, render: browser}]\n", "follow[0].render"},
	} {
		s, err := spider.ParseSpec([]byte(base+tc.spec), "r.yaml")
		var st spider.Settings
		if err == nil {
			st, err = s.Settings()
		}
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%q: %v", tc.spec, err)
		case tc.field == "" && (st.Runtime != spider.RuntimeECS || (st.Render != spider.RenderBrowser && !strings.Contains(tc.spec, "render: browser}"))):
			t.Errorf("%q: runtime %q render %q; want a browser spider on ecs", tc.spec, st.Runtime, st.Render)
		case tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field)):
			t.Errorf("%q: %v; want an error naming %s", tc.spec, err, tc.field)
		}
	}
}
