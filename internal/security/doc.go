// Package security holds crawlq's cross-package security tests (it has no code of its own):
// every user-supplied field reaches SQL only as a parameter, spiders cannot read local files or
// reach link-local metadata addresses unless allowed, and secrets never appear in logs.
// RELIABILITY.md lists each guarantee with the test that backs it.
package security
