package spiderstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	pep440 "github.com/aquasecurity/go-pep440-version"
)

// MaxProjectVersionLen bounds a project version. Scrapyd takes any string; scrapyd-deploy sends
// timestamps, git's `r<count>-<branch>` (branch names may hold "/") or a label of the user's.
const MaxProjectVersionLen = 200

// projectVersionRE is what a project version may hold: printable ASCII without spaces, starting
// with a letter or digit. No ".." or ":" (see CheckProjectVersion).
var projectVersionRE = regexp.MustCompile(`^[A-Za-z0-9][!-~]*$`)

// CheckProjectVersion validates a project version as addversion takes it: 1-200 of printable
// ASCII without spaces, starting with a letter or digit, without ".." and ":" (a version is
// part of file names and of a PYTHONPATH where the egg is run: EggFileName).
func CheckProjectVersion(version string) error {
	if len(version) == 0 || len(version) > MaxProjectVersionLen || !projectVersionRE.MatchString(version) ||
		strings.Contains(version, "..") || strings.Contains(version, ":") {
		return fmt.Errorf("%w: version %q: want 1-%d printable ASCII characters without spaces, \"..\" or \":\", starting with a letter or digit",
			ErrInvalid, clip(version), MaxProjectVersionLen)
	}
	return nil
}

// SortVersions sorts project versions as Scrapyd does (its eggstorage.sorted_versions): by
// PEP 440 order (packaging.version.Version: 1.2 < 1.10, 1.0rc1 < 1.0 < 1.0.post1) when every
// version is a valid PEP 440 version, else as plain strings. The last is the highest: the one a
// run uses when it pins none. It sorts vs in place and returns it.
func SortVersions(vs []string) []string {
	parsed := make(map[string]pep440.Version, len(vs))
	for _, v := range vs {
		p, err := pep440.Parse(v)
		if err != nil {
			slices.Sort(vs)
			return vs
		}
		parsed[v] = p
	}
	slices.SortStableFunc(vs, func(a, b string) int { return parsed[a].Compare(parsed[b]) })
	return vs
}

// safeVersion is a version as a file or object name: the characters Scrapyd keeps in its egg
// file names ([A-Za-z0-9_-], others become "_"), and, when anything was replaced, a short hash
// of the version so two versions never share a name.
func safeVersion(version string) string {
	var b strings.Builder
	changed := false
	for _, r := range version {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
			changed = true
		}
	}
	if !changed {
		return version
	}
	sum := sha256.Sum256([]byte(version))
	return b.String() + "-" + hex.EncodeToString(sum[:4])
}

// EggFileName is the file name of a project version's egg where it is run (a single path
// element, whatever the version holds: "/" included).
func EggFileName(project, version string) string {
	return escapeProject(project) + "-" + safeVersion(version) + ".egg"
}

// eggRef is the object key of a project version's egg in an Eggs store.
func eggRef(project, version string) string {
	return escapeProject(project) + "/" + safeVersion(version) + ".egg"
}
