package spider

import (
	"fmt"
	"time"

	"crawlq/internal/backoff"
)

// Retry says how a spider's failing pages and hosts are retried, and how many pages may die
// before its run counts as failed. The zero value of each field means its default.
//
// A page whose fetch fails in a way that may pass (a timeout, a refused or reset connection, 408,
// 429, 5xx) is retried with backoff until Attempts. When the failure is the host's rather than the
// page's (the connection fails, or several 5xx/429 come in a row), the host is paused for every
// worker instead: its pages wait without counting attempts, the pause doubling from HostPause up
// to MaxHostPause, until the host answers again or has been down for HostDownLimit, after which
// its pages die at their next failed probe, leaving the run incomplete (or failed, when nothing
// was fetched), to be redriven once the site is back. While a run has fetched no page at all, the
// shorter StartDownLimit applies instead: a start URL that never answers fails its run within
// minutes, while an outage in the middle of a crawl may last HostDownLimit and lose nothing.
type Retry struct {
	Attempts      int           // fetches of a page before it is dead; default 5, at most 100
	Backoff       time.Duration // delay before a page's first retry, doubling; default 1s
	MaxBackoff    time.Duration // longest delay between a page's retries; default 1m
	HostPause     time.Duration // first pause of a failing host, doubling; default 1s
	MaxHostPause  time.Duration // longest single pause of a host; default 1m
	HostDownLimit time.Duration // how long a host may stay down before its pages die; default 10m
	// StartDownLimit replaces HostDownLimit (when shorter) while the run has fetched no page;
	// default 1m.
	StartDownLimit time.Duration
	// MaxDeadShare is the share of a run's pages (dead / (dead + fetched)) that may die before the
	// run is failed rather than incomplete; default 0.5. 0 < share <= 1.
	MaxDeadShare float64
}

// The defaults of Retry.
const (
	DefaultAttempts       = 5
	MaxAttempts           = 100
	DefaultBackoff        = time.Second
	DefaultMaxBackoff     = time.Minute
	DefaultHostPause      = time.Second
	DefaultMaxHostPause   = time.Minute
	DefaultHostDownLimit  = 10 * time.Minute
	DefaultStartDownLimit = time.Minute
	DefaultMaxDeadShare   = 0.5
)

// WithDefaults fills the zero fields.
func (r Retry) WithDefaults() Retry {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if r.Attempts == 0 {
		r.Attempts = DefaultAttempts
	}
	def(&r.Backoff, DefaultBackoff)
	def(&r.MaxBackoff, DefaultMaxBackoff)
	def(&r.HostPause, DefaultHostPause)
	def(&r.MaxHostPause, DefaultMaxHostPause)
	def(&r.HostDownLimit, DefaultHostDownLimit)
	def(&r.StartDownLimit, DefaultStartDownLimit)
	if r.MaxDeadShare == 0 {
		r.MaxDeadShare = DefaultMaxDeadShare
	}
	return r
}

// PageBackoff is the delay before retrying a page after its attempt-th failed fetch (1-based):
// Backoff, doubling, at most MaxBackoff.
func (r Retry) PageBackoff(attempt int) time.Duration {
	return capped(r.Backoff, r.MaxBackoff).Delay(attempt)
}

// DownLimit is how long a host may stay down before its pages die: HostDownLimit, or the shorter
// StartDownLimit while the run has fetched nothing (fetched false).
func (r Retry) DownLimit(fetched bool) time.Duration {
	if fetched || r.StartDownLimit <= 0 {
		return r.HostDownLimit
	}
	return min(r.StartDownLimit, r.HostDownLimit)
}

// HostPauseAfter is how long a host is paused after its streak-th failed probe in a row (1-based):
// HostPause, doubling, at most MaxHostPause.
func (r Retry) HostPauseAfter(streak int) time.Duration {
	return capped(r.HostPause, r.MaxHostPause).Delay(streak)
}

// capped is the backoff policy from base doubling up to limit. A limit below base wins (validate
// refuses it in specs, but a Retry built in code may hold one), as it always has.
func capped(base, limit time.Duration) backoff.Policy {
	return backoff.Policy{Base: min(base, limit), Max: limit}
}

func (r Retry) fieldErrors(prefix string) []FieldError {
	var errs []FieldError
	add := func(path, msg string) { errs = append(errs, FieldError{Path: prefix + path, Msg: msg}) }
	if r.Attempts < 0 || r.Attempts > MaxAttempts {
		add("attempts", fmt.Sprintf("%d out of range 1..%d", r.Attempts, MaxAttempts))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"backoff", r.Backoff}, {"max_backoff", r.MaxBackoff}, {"host_pause", r.HostPause},
		{"max_host_pause", r.MaxHostPause}, {"host_down_limit", r.HostDownLimit}, {"start_down_limit", r.StartDownLimit}} {
		if d.v < 0 {
			add(d.name, "negative")
		}
	}
	if r.Backoff > 0 && r.MaxBackoff > 0 && r.MaxBackoff < r.Backoff {
		add("max_backoff", fmt.Sprintf("%s is shorter than backoff %s", r.MaxBackoff, r.Backoff))
	}
	if r.HostPause > 0 && r.MaxHostPause > 0 && r.MaxHostPause < r.HostPause {
		add("max_host_pause", fmt.Sprintf("%s is shorter than host_pause %s", r.MaxHostPause, r.HostPause))
	}
	if r.MaxDeadShare < 0 || r.MaxDeadShare > 1 {
		add("max_dead_share", fmt.Sprintf("%g out of range (0, 1]", r.MaxDeadShare))
	}
	return errs
}

// RetrySpec is the retry block of a spider file; durations are Go duration strings.
type RetrySpec struct {
	Attempts      int    `yaml:"attempts"`        // default 5
	Backoff       string `yaml:"backoff"`         // default "1s"
	MaxBackoff    string `yaml:"max_backoff"`     // default "1m"
	HostPause     string `yaml:"host_pause"`      // default "1s"
	MaxHostPause  string `yaml:"max_host_pause"`  // default "1m"
	HostDownLimit string `yaml:"host_down_limit"` // default "10m"
	// StartDownLimit: the down limit while the run has fetched no page; default "1m".
	StartDownLimit string   `yaml:"start_down_limit"`
	MaxDeadShare   *float64 `yaml:"max_dead_share"` // default 0.5
}

// retry assumes a validated spec.
func (r *RetrySpec) retry() Retry {
	if r == nil {
		return Retry{}
	}
	d := func(s string) time.Duration { v, _ := time.ParseDuration(orZero(s)); return v }
	out := Retry{Attempts: r.Attempts, Backoff: d(r.Backoff), MaxBackoff: d(r.MaxBackoff), HostPause: d(r.HostPause),
		MaxHostPause: d(r.MaxHostPause), HostDownLimit: d(r.HostDownLimit), StartDownLimit: d(r.StartDownLimit)}
	if r.MaxDeadShare != nil {
		out.MaxDeadShare = *r.MaxDeadShare
	}
	return out
}

func (r *RetrySpec) validate() []FieldError {
	if r == nil {
		return nil
	}
	var errs []FieldError
	errs = append(errs, checkDuration("retry.backoff", r.Backoff)...)
	errs = append(errs, checkDuration("retry.max_backoff", r.MaxBackoff)...)
	errs = append(errs, checkDuration("retry.host_pause", r.HostPause)...)
	errs = append(errs, checkDuration("retry.max_host_pause", r.MaxHostPause)...)
	errs = append(errs, checkDuration("retry.host_down_limit", r.HostDownLimit)...)
	errs = append(errs, checkDuration("retry.start_down_limit", r.StartDownLimit)...)
	if r.MaxDeadShare != nil && (*r.MaxDeadShare <= 0 || *r.MaxDeadShare > 1) {
		errs = append(errs, FieldError{Path: "retry.max_dead_share", Msg: fmt.Sprintf("%g out of range (0, 1]", *r.MaxDeadShare)})
	}
	if len(errs) > 0 {
		return errs // the durations do not parse: comparing them would repeat the error
	}
	return r.retry().fieldErrors("retry.")
}
