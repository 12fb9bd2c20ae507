package spider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Revisit policies (Settings.Revisit; the spec's revisit; "" is always): how a run treats the
// pages an earlier run of the spider fetched (internal/urlstate keeps what each one answered).
const (
	// RevisitAlways fetches and parses every page and emits every item, as a first run does;
	// no state is kept across runs. The default.
	RevisitAlways = "always"
	// RevisitChangedOnly asks with the last answer's validators (If-None-Match,
	// If-Modified-Since): a page answering 304, or with a body the same as last time, is not
	// parsed, emits nothing, and its stored links are followed; a changed page emits only its new
	// and changed items.
	RevisitChangedOnly = "changed_only"
	// RevisitAdaptive is changed_only, and a page fetched again before its revisit interval has
	// passed is not requested at all: the interval doubles each time the page is found unchanged
	// and halves when it changed, between RevisitMin and RevisitMax.
	RevisitAdaptive = "adaptive"
)

// Defaults of the adaptive revisit interval and of how long a URL's state is kept unseen.
const (
	DefaultRevisitMin = time.Hour
	DefaultRevisitMax = 7 * 24 * time.Hour
	DefaultStateTTL   = 30 * 24 * time.Hour
)

// RevisitSpec is the spec's revisit_interval: the bounds of an adaptive revisit (Go durations).
type RevisitSpec struct {
	Min string `yaml:"min"` // default "1h"
	Max string `yaml:"max"` // default "168h"
}

// KeepsState reports whether a spider crawled with s keeps URL state across its runs.
func (s Settings) KeepsState() bool {
	return s.Revisit == RevisitChangedOnly || s.Revisit == RevisitAdaptive
}

func revisitErrors(s Settings, prefix string) []FieldError {
	var errs []FieldError
	add := func(path, msg string) { errs = append(errs, FieldError{Path: prefix + path, Msg: msg}) }
	switch s.Revisit {
	case "", RevisitAlways, RevisitChangedOnly, RevisitAdaptive:
	default:
		add("revisit", fmt.Sprintf("%q is not one of always, changed_only, adaptive", truncate(s.Revisit)))
	}
	if s.RevisitMin < 0 {
		add("revisit_interval.min", "negative")
	}
	if s.RevisitMax < 0 {
		add("revisit_interval.max", "negative")
	}
	if s.RevisitMin > 0 && s.RevisitMax > 0 && s.RevisitMin > s.RevisitMax {
		add("revisit_interval", fmt.Sprintf("min %s is more than max %s", s.RevisitMin, s.RevisitMax))
	}
	if (s.RevisitMin != 0 || s.RevisitMax != 0) && s.Revisit != RevisitAdaptive {
		add("revisit_interval", "needs revisit: adaptive")
	}
	if s.StateTTL < 0 {
		add("state_ttl", "negative")
	}
	return errs
}

// specRevisitErrors checks the spec's revisit durations, which Settings holds parsed.
func (s *Spec) specRevisitErrors() []FieldError {
	var errs []FieldError
	if s.RevisitInterval != nil {
		errs = append(errs, checkDuration("revisit_interval.min", s.RevisitInterval.Min)...)
		errs = append(errs, checkDuration("revisit_interval.max", s.RevisitInterval.Max)...)
	}
	errs = append(errs, checkDuration("state_ttl", s.StateTTL)...)
	return errs
}

// revisitSettings fills the revisit fields of st from a valid spec.
func (s *Spec) revisitSettings(st *Settings) {
	st.Revisit = s.Revisit
	if s.RevisitInterval != nil {
		st.RevisitMin, _ = time.ParseDuration(orZero(s.RevisitInterval.Min))
		st.RevisitMax, _ = time.ParseDuration(orZero(s.RevisitInterval.Max))
	}
	st.StateTTL, _ = time.ParseDuration(orZero(s.StateTTL))
}

// RevisitBounds returns the adaptive revisit interval's bounds, defaults filled in.
func (s Settings) RevisitBounds() (lo, hi time.Duration) {
	lo, hi = s.RevisitMin, s.RevisitMax
	if lo == 0 {
		lo = DefaultRevisitMin
		if hi > 0 && hi < lo {
			lo = hi
		}
	}
	if hi == 0 {
		hi = max(DefaultRevisitMax, lo)
	}
	return lo, hi
}

// StateKeep returns how long URL state no run reached is kept (StateTTL, default filled in).
func (s Settings) StateKeep() time.Duration {
	if s.StateTTL == 0 {
		return DefaultStateTTL
	}
	return s.StateTTL
}

// StateLiner is implemented by spiders whose extraction rules can be named: URL state kept for
// one set of rules (the links and items a page yielded) is not used by another.
type StateLiner interface {
	StateLine() string
}

// StateLine returns the line of URL state runs of s use: the spider's StateLine, or "" (one line
// for every version of a Go spider).
func StateLine(s Spider) string {
	if l, ok := s.(StateLiner); ok {
		return l.StateLine()
	}
	return ""
}

// StateLine names the declarative spider's extraction: a hash of its follow and item rules and
// its depth limit, so a new version of the spec that extracts the same keeps its URL state and one
// that extracts differently starts a line of its own (its first run fetches every page in full).
func (d *declarative) StateLine() string { return d.line }

func stateLine(spec *Spec) string {
	b, _ := json.Marshal(struct {
		Follow   []FollowRule
		Items    []ItemRule
		MaxDepth int
	}{spec.Follow, spec.Items, spec.MaxDepth})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}
