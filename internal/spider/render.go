package spider

import "crawlq/internal/browser"

// checkWaitFor returns why w is not a wait_for a browser page can wait for, or "": the rules are
// the browser's own (browser.ParseWait: "" for the load event, "networkidle", a positive Go
// duration, or a CSS selector), so a spec is refused at push for what would fail at render.
func checkWaitFor(w string) string {
	if _, err := browser.ParseWait(w); err != nil {
		return err.Error()
	}
	return ""
}
