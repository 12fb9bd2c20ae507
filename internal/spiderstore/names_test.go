package spiderstore

import "testing"

func TestSpiderNameRoundTrips(t *testing.T) {
	for _, c := range []struct{ project, spider, name string }{
		{"catalog", "books", "catalog.books"}, // every project name taken before keeps its runs' names
		{"shop-eu_2", "a.b", "shop-eu_2.a.b"},
		{"shop.eu", "books", "shop%2Eeu.books"},
		{"my shop", "x", "my%20shop.x"},
		{`it's "q"`, "x", "it%27s%20%22q%22.x"},
	} {
		if got := SpiderName(c.project, c.spider); got != c.name {
			t.Fatalf("SpiderName(%q, %q) = %q, want %q", c.project, c.spider, got, c.name)
		}
		p, s, ok := SplitName(c.name)
		if !ok || p != c.project || s != c.spider {
			t.Fatalf("SplitName(%q) = %q, %q, %v", c.name, p, s, ok)
		}
	}
	// What SpiderName never writes is a spec spider's name or nothing, never a project's.
	for _, name := range []string{"demo", "shop%2eeu.books", "a%2.x", "a%.x", "%2E%2E.x", ".x", "a."} {
		if p, s, ok := SplitName(name); ok {
			t.Fatalf("SplitName(%q) = %q, %q: want not a project's spider", name, p, s)
		}
	}
}
