package cli

import "time"

// parseAt reads an --at flag: an RFC 3339 time, not more than a day in the past (a date mistyped
// by a year would otherwise be due at once and show as a backlog days or centuries old).
func parseAt(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, usageErr("--at %q: want RFC 3339 such as 2026-01-02T15:04:05Z", s)
	}
	if time.Since(t) > 24*time.Hour {
		return time.Time{}, usageErr("--at %s is more than a day in the past", s)
	}
	return t, nil
}
