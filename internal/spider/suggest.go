package spider

import (
	"fmt"
	"sort"
	"strings"

	"github.com/agnivade/levenshtein"
)

// didYouMean names the known field nearest to key by edit distance (case ignored), as
// `; did you mean "concurrency"?`, or returns "" when none is near enough to be the one meant:
// a typo is a letter or two, so a key more than a quarter of its length (at least one edit, at
// most three) away from every field gets no guess rather than a wrong one.
func didYouMean[V any](key string, known map[string]V) string {
	limit := min(max(1, len(key)/4), 3)
	best, bestDist := "", limit+1
	names := make([]string, 0, len(known))
	for name := range known {
		names = append(names, name)
	}
	sort.Strings(names) // ties go to the first name, the same on every run
	lower := strings.ToLower(key)
	for _, name := range names {
		d := levenshtein.ComputeDistance(lower, name)
		if swapped(lower, name) {
			d = 1 // two letters typed in the wrong order are one slip ("dealy"), not two edits
		}
		if d < bestDist {
			best, bestDist = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// swapped reports whether a and b differ only by two adjacent bytes swapped.
func swapped(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
}

// Suggest is didYouMean for a key among names, for the packages that check names of their own (a
// run's settings, a spider's name): `; did you mean "delay"?`, or "".
func Suggest(key string, names ...string) string {
	known := make(map[string]struct{}, len(names))
	for _, n := range names {
		known[n] = struct{}{}
	}
	return didYouMean(key, known)
}
