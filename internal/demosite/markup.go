package demosite

import (
	"fmt"
	"html"
	"slices"
	"strings"
)

// Markups of the item pages: the site "changes" under a spider, as real sites do, so tests and
// demos can show a spider breaking without its run failing.
const (
	// MarkupRedesign renames every class the demo spider's selectors use: its item rule
	// matches nothing and runs yield 0 items while every page still answers 200.
	MarkupRedesign = "redesign"
	// MarkupNoCategory drops the category from every third item page (k divisible by 3), so
	// the category field's coverage falls to about two thirds.
	MarkupNoCategory = "no-category"
)

// Markups lists the valid Config.Markup values ("" is the default markup).
func Markups() []string { return []string{"", MarkupRedesign, MarkupNoCategory} }

func validMarkup(m string) bool { return slices.Contains(Markups(), m) }

// SetMarkup switches the item pages' markup for the requests that follow.
func (s *Site) SetMarkup(m string) error {
	if !validMarkup(m) {
		return fmt.Errorf("demosite: markup %q: want one of %q", m, Markups())
	}
	s.mu.Lock()
	s.markup = m
	s.mu.Unlock()
	return nil
}

// Markup returns the item pages' current markup.
func (s *Site) Markup() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.markup
}

// ExpectedFields returns, per field spiders/demo.yaml extracts, how many of the items a correct
// crawl yields under the current markup have it present and non-empty.
func (s *Site) ExpectedFields() map[string]int {
	n := s.cfg.Items
	switch s.Markup() {
	case MarkupRedesign:
		return map[string]int{}
	case MarkupNoCategory:
		return map[string]int{"sku": n, "title": n, "price": n, "url": n, "category": n - n/3}
	}
	return map[string]int{"sku": n, "title": n, "price": n, "url": n, "category": n}
}

// itemMarkup writes item k's product block in a non-default markup and reports whether it did.
func itemMarkup(b *strings.Builder, k int, markup string, rev int) bool {
	switch markup {
	case MarkupRedesign:
		fmt.Fprintf(b, `<section class="pdp"><h1 class="pdp-name">%s</h1><div class="pdp-cost">%s</div>`+
			`<p>SKU <b class="pdp-ref">%s</b></p><p>Category <b class="pdp-cat">%s</b></p>`+
			`<a class="pdp-link" href="item-%d.html">permalink</a></section>`,
			html.EscapeString(title(k)), price(k, rev), sku(k), category(k), k)
		return true
	case MarkupNoCategory:
		cat := fmt.Sprintf(`<p>Category <span class="category">%s</span></p>`, category(k))
		if k%3 == 0 {
			cat = ""
		}
		fmt.Fprintf(b, `<div class="product"><h1 class="title">%s</h1><p class="price">%s</p>`+
			`<p>SKU <span class="sku">%s</span></p>%s<a class="permalink" href="item-%d.html">permalink</a></div>`,
			html.EscapeString(title(k)), price(k, rev), sku(k), cat, k)
		return true
	}
	return false
}
