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
		if d := levenshtein.ComputeDistance(lower, name); d < bestDist {
			best, bestDist = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}
