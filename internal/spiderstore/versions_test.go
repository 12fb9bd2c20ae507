package spiderstore_test

import (
	"errors"
	"strings"
	"testing"

	"crawlq/internal/spiderstore"
)

// Scrapyd's sorted_versions: packaging's Version order when every version parses, else string
// order. The expected orders are what Python's sorted(vs, key=packaging.version.Version) and
// sorted(vs) give.
func TestSortVersionsAsScrapyd(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"1.10,1.2,1.0rc1,1.0,1.0.post1,2.0.dev1,v3,1!0.1", "1.0rc1,1.0,1.0.post1,1.2,1.10,2.0.dev1,v3,1!0.1"},
		{"1700000000,1600000000,1700000001", "1600000000,1700000000,1700000001"},
		{"r9-main,r12-feature/login,r10-main", "r10-main,r12-feature/login,r9-main"},
		{"1.2,r1,1.10", "1.10,1.2,r1"},
	} {
		if got := strings.Join(spiderstore.SortVersions(strings.Split(c.in, ",")), ","); got != c.want {
			t.Errorf("SortVersions(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// The highest version in Scrapyd's order runs by default, whatever the upload order; versions
// with "/" and long ones are taken, and an egg's file name stays one path element.
func TestProjectVersionsInScrapydOrder(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	e := egg(t, "[scrapy]\nsettings = shop.settings\n", map[string]string{"shop/spiders/a.py": "class A(scrapy.Spider):\n    name = 'alpha'\n"})
	for _, v := range []string{"1.10", "1.2", "1.9"} {
		if _, err := st.AddVersion(ctx, "shop", v, e); err != nil {
			t.Fatal(err)
		}
	}
	if vs, err := st.ProjectVersions(ctx, "shop"); err != nil || strings.Join(vs, ",") != "1.2,1.9,1.10" {
		t.Fatalf("versions: %v %v, want 1.2,1.9,1.10", vs, err)
	}
	if pv, err := st.GetProjectVersion(ctx, "shop", ""); err != nil || pv.Version != "1.10" {
		t.Fatalf("default version: %+v %v, want 1.10 (the highest)", pv, err)
	}
	if res, err := st.Resolve(ctx, "shop.alpha", ""); err != nil || res.Version != "1.10" {
		t.Fatalf("resolve: %+v %v, want 1.10", res, err)
	}
	ls, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Name == "shop.alpha" && l.Latest != "1.10" {
			t.Fatalf("list: %+v, want latest 1.10", l)
		}
	}

	long := "r1234-" + strings.Repeat("feature-", 20) // 166 characters
	for _, v := range []string{"r12-feature/login", long} {
		if _, err := st.AddVersion(ctx, "git", v, e); err != nil {
			t.Fatalf("add version %q: %v", v, err)
		}
		if b, err := st.Egg(ctx, "git", v); err != nil || len(b) != len(e) {
			t.Fatalf("egg of %q: %v", v, err)
		}
		if name := spiderstore.EggFileName("git", v); strings.ContainsAny(name, "/:") || len(name) > 255 {
			t.Fatalf("egg file name %q of %q: want one path element", name, v)
		}
	}
	if spiderstore.EggFileName("git", "r12-feature/login") == spiderstore.EggFileName("git", "r12-feature_login") {
		t.Fatal("two versions share an egg file name")
	}
	for _, v := range []string{strings.Repeat("a", 201), "a/../../etc", "a:b", "has space", "-x", "v\x00"} {
		if _, err := st.AddVersion(ctx, "git", v, e); !errors.Is(err, spiderstore.ErrInvalid) || !strings.Contains(err.Error(), "version") {
			t.Fatalf("add version %q: %v, want refused naming the version", v, err)
		}
	}
}
