package cronstore

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

var (
	rateRe = regexp.MustCompile(`^rate\(([1-9][0-9]{0,5}) (second|seconds|minute|minutes|hour|hours|day|days)\)$`)
	cronRe = regexp.MustCompile(`^cron\(([^()]+)\)$`)
	intRe  = regexp.MustCompile(`[0-9]+`)
)

// parser reads the five fields an EventBridge cron shares with classic cron, "?" included.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// Schedule computes the ticks of one expression in one timezone.
type Schedule struct {
	rate time.Duration // a rate(...) expression
	cron cron.Schedule // a cron(...) expression
	loc  *time.Location
}

// Parse reads an EventBridge Scheduler expression, as api.ScheduleExpression writes it:
// cron(minutes hours day-of-month month day-of-week year), whose day of week counts 1-7 from
// Sunday, or rate(N minutes|hours|days); and, here only (EventBridge's finest rate is a minute),
// rate(N seconds). What robfig/cron cannot say (L, W and # in the day fields, a year other than
// *) is refused, naming the field. tz is an IANA timezone name ("" is UTC).
func Parse(expr, tz string) (Schedule, error) {
	loc, err := time.LoadLocation(tz)
	if tz == "" {
		loc, err = time.UTC, nil
	}
	if err != nil {
		return Schedule{}, fmt.Errorf("timezone %q: %w", tz, err)
	}
	expr = strings.TrimSpace(expr)
	if m := rateRe.FindStringSubmatch(expr); m != nil {
		n, _ := strconv.Atoi(m[1])
		unit := map[string]time.Duration{"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}[strings.TrimSuffix(m[2], "s")]
		if (n == 1) != !strings.HasSuffix(m[2], "s") {
			return Schedule{}, fmt.Errorf("expression %q: want rate(1 %s) or rate(N %ss)", expr, strings.TrimSuffix(m[2], "s"), strings.TrimSuffix(m[2], "s"))
		}
		return Schedule{rate: time.Duration(n) * unit, loc: loc}, nil
	}
	m := cronRe.FindStringSubmatch(expr)
	if m == nil {
		return Schedule{}, fmt.Errorf("expression %q: want cron(minutes hours day-of-month month day-of-week year) or rate(N unit)", expr)
	}
	f := strings.Fields(m[1])
	if len(f) != 6 {
		return Schedule{}, fmt.Errorf("expression %q: cron(...) has 6 fields (minutes hours day-of-month month day-of-week year)", expr)
	}
	if f[5] != "*" {
		return Schedule{}, fmt.Errorf("expression %q: year %q: only * is supported locally", expr, f[5])
	}
	for i, name := range []string{"day-of-month", "day-of-week"} {
		if x := f[2+2*i]; strings.ContainsAny(x, "LW#") && x != "?" {
			return Schedule{}, fmt.Errorf("expression %q: %s %q: L, W and # are not supported locally", expr, name, x)
		}
	}
	dow, err := classicDow(f[4])
	if err != nil {
		return Schedule{}, fmt.Errorf("expression %q: day-of-week %q: %w", expr, f[4], err)
	}
	sc, err := parser.Parse(strings.Join([]string{f[0], f[1], f[2], f[3], dow}, " "))
	if err != nil {
		return Schedule{}, fmt.Errorf("expression %q: %w", expr, err)
	}
	return Schedule{cron: sc, loc: loc}, nil
}

// classicDow turns EventBridge's day-of-week numbers (1-7, Sunday 1) into classic cron's (0-6,
// Sunday 0); names, * and ? mean the same in both, and a step's count is not a day.
func classicDow(field string) (string, error) {
	parts := strings.Split(field, ",")
	for i, p := range parts {
		base, step, hasStep := strings.Cut(p, "/")
		var bad error
		base = intRe.ReplaceAllStringFunc(base, func(s string) string {
			n, _ := strconv.Atoi(s)
			if n < 1 || n > 7 {
				bad = fmt.Errorf("%d is not a day (1-7, Sunday 1)", n)
				return s
			}
			return strconv.Itoa(n - 1)
		})
		if bad != nil {
			return "", bad
		}
		if hasStep {
			base += "/" + step
		}
		parts[i] = base
	}
	return strings.Join(parts, ","), nil
}

// First is the first tick of a schedule created at now: the next cron time, or now plus the rate.
func (s Schedule) First(now time.Time) time.Time {
	if s.rate > 0 {
		return now.Add(s.rate).Truncate(time.Millisecond)
	}
	return s.cron.Next(now.In(s.loc))
}

// After is the tick that follows tick, and is after now: ticks missed while nothing fired are
// skipped, not caught up one by one.
func (s Schedule) After(tick, now time.Time) time.Time {
	if s.rate > 0 {
		next := tick.Add(s.rate)
		if !next.After(now) {
			next = tick.Add(s.rate * (now.Sub(tick)/s.rate + 1))
		}
		return next
	}
	next := s.cron.Next(tick.In(s.loc))
	if !next.After(now) {
		next = s.cron.Next(now.In(s.loc))
	}
	return next
}
