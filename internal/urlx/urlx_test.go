package urlx

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"HTTP://Example.COM", "http://example.com/"},
		{"http://example.com:80/a", "http://example.com/a"},
		{"https://example.com:443/a", "https://example.com/a"},
		{"https://example.com:8443/a", "https://example.com:8443/a"},
		{"http://example.com:0080/", "http://example.com/"},
		{"http://example.com:/", "http://example.com/"},
		{"http://example.com/a#frag", "http://example.com/a"},
		{"http://example.com/a/./b/../c", "http://example.com/a/c"},
		{"http://example.com/../../a", "http://example.com/a"},
		{"http://example.com/a/..", "http://example.com/"},
		{"http://example.com/a/.", "http://example.com/a/"},
		{"http://example.com/?b=2&a=1&a=0", "http://example.com/?a=1&a=0&b=2"},
		{"http://example.com/?", "http://example.com/"},
		{"http://example.com/?&&x=1&", "http://example.com/?x=1"},
		{"http://example.com/%7euser/%2fa%3f", "http://example.com/~user/%2Fa%3F"},
		{"http://example.com/%41%62c", "http://example.com/Abc"},
		{"http://example.com/a b", "http://example.com/a%20b"},
		{"http://example.com/%zz", "http://example.com/%25zz"},
		{"http://example.com/?q=a%26b&p=%e2%82%ac", "http://example.com/?p=%E2%82%AC&q=a%26b"},
		{"http://bücher.example/", "http://xn--bcher-kva.example/"},
		{"http://BÜCHER.example/", "http://xn--bcher-kva.example/"},
		{"http://[2001:DB8::1]:80/", "http://[2001:db8::1]/"},
		{"http://0x7f.1/", "http://127.0.0.1/"},
		{"http://2852039166/", "http://169.254.169.254/"},
		{"http://0251.0376.0251.0376/", "http://169.254.169.254/"},
		{"  http://example.com/\n ", "http://example.com/"},
		{"http://exa\nmple.com/p\tq", "http://example.com/pq"},
		{"http://user:p%40ss@example.com/", "http://user:p%40ss@example.com/"},
		{"http://under_score.example.com/", "http://under_score.example.com/"},
	}
	for _, c := range cases {
		got, err := Canonical(c.in)
		if err != nil {
			t.Errorf("Canonical(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("Canonical(%q) = %q, want %q", c.in, got, c.want)
		}
		again, err := Canonical(got)
		if err != nil || again != got {
			t.Errorf("Canonical(%q) not idempotent: %q, %v", got, again, err)
		}
	}
}

func TestCanonicalRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want error
	}{
		{"file:///etc/passwd", ErrScheme},
		{"javascript:alert(1)", ErrScheme},
		{"mailto:a@example.com", ErrScheme},
		{"data:text/html,hi", ErrScheme},
		{"ftp://example.com/", ErrScheme},
		{"/relative/path", ErrInvalid},
		{"http://", ErrInvalid},
		{"http:opaque", ErrInvalid},
		{"http://example.com:99999/", ErrInvalid},
		{"http://256.1.1.1/", ErrInvalid},
		{"http://1.2.3.4.5/", ErrInvalid},
		{"http://example.com/" + strings.Repeat("a", MaxLen), ErrTooLong},
		{"http://example.com/a" + strings.Repeat(" ", 700) + "b", ErrTooLong}, // grows when escaped
	}
	for _, c := range cases {
		got, err := Canonical(c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("Canonical(%.40q) = %q, %v; want error %v", c.in, got, err, c.want)
		}
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	base, _ := url.Parse("http://example.com/catalogue/page-2.html?x=1")
	cases := []struct{ href, want string }{
		{"item-3.html", "http://example.com/catalogue/item-3.html"},
		{"./item-3.html#reviews", "http://example.com/catalogue/item-3.html"},
		{"../catalogue/item-3.html", "http://example.com/catalogue/item-3.html"},
		{"/", "http://example.com/"},
		{"?page=3", "http://example.com/catalogue/page-2.html?page=3"},
		{"//Other.example:80/x", "http://other.example/x"},
		{" HTTPS://example.com/y ", "https://example.com/y"},
	}
	for _, c := range cases {
		got, err := Resolve(base, c.href)
		if err != nil || got != c.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", c.href, got, err, c.want)
		}
	}
	for _, bad := range []string{"javascript:void(0)", "mailto:x@y", "data:,x", "file:///x"} {
		if _, err := Resolve(base, bad); !errors.Is(err, ErrScheme) {
			t.Errorf("Resolve(%q): %v, want ErrScheme", bad, err)
		}
	}
	if _, err := Resolve(nil, "rel"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Resolve(nil, rel): %v, want ErrInvalid", err)
	}
}

func TestHost(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"http://Example.com:80/a":   "example.com",
		"https://example.com:8443/": "example.com:8443",
		"http://127.0.0.1:8088/":    "127.0.0.1:8088",
		"javascript:x":              "",
		"not a url":                 "",
	}
	for in, want := range cases {
		if got := Host(in); got != want {
			t.Errorf("Host(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Hostname("http://127.0.0.1:8088/"); got != "127.0.0.1" {
		t.Errorf("Hostname = %q", got)
	}
}

func TestInDomains(t *testing.T) {
	t.Parallel()
	doms := []string{"example.com", "127.0.0.1"}
	for host, want := range map[string]bool{
		"example.com": true, "shop.example.com": true, "EXAMPLE.COM.": true,
		"badexample.com": false, "example.com.evil.org": false, "127.0.0.1": true,
		"1.127.0.0.1": false, "": false,
	} {
		if got := InDomains(host, doms); got != want {
			t.Errorf("InDomains(%q) = %v, want %v", host, got, want)
		}
	}
	if InDomains("example.com", nil) {
		t.Error("empty domain list must match nothing")
	}
}

func TestIsLinkLocal(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"169.254.169.254": true, "169.254.1.2": true, "[fd00:ec2::254]": true, "fd00:ec2::254": true,
		"metadata.google.internal": true, "METADATA.google.internal.": true, "2852039166": true,
		"0xa9fea9fe": true, "::ffff:169.254.169.254": true, "fe80::1": true,
		"127.0.0.1": false, "example.com": false, "10.0.0.1": false,
	} {
		if got := IsLinkLocal(host); got != want {
			t.Errorf("IsLinkLocal(%q) = %v, want %v", host, got, want)
		}
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		"http://example.com/", "HTTP://Example.COM:80/a/./b/../c?b=2&a=1#f", "https://bücher.example/%7e",
		"http://[::1]:8080/x", "http://0x7f.1/", "http://a/%zz?%", "http://u:p@h/", "javascript:alert(1)",
		"http://[fe80::1%25en0]/", "http://a/b/../../..", "http://a/?a=%26&b=+", "//x", "http://xn--bcher-kva.example/",
		"http://a.b./", "http://%41.com/", "http://０.０.０.１/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := Canonical(raw)
		if err != nil {
			return
		}
		if len(c) > MaxLen {
			t.Fatalf("canonical form longer than MaxLen: %d", len(c))
		}
		c2, err := Canonical(c)
		if err != nil {
			t.Fatalf("Canonical(%q) = %q, which fails: %v", raw, c, err)
		}
		if c2 != c {
			t.Fatalf("not idempotent: %q -> %q -> %q", raw, c, c2)
		}
		if _, err := url.Parse(c); err != nil {
			t.Fatalf("canonical %q does not parse: %v", c, err)
		}
	})
}
