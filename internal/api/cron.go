package api

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

var descriptors = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

var (
	rateRe   = regexp.MustCompile(`^rate\(([1-9][0-9]{0,5}) (minute|minutes|hour|hours|day|days)\)$`)
	cronRe   = regexp.MustCompile(`^cron\(([^()]+)\)$`)
	ebFieldR = regexp.MustCompile(`^[0-9A-Za-z*?/,#\-]+$`)
)

// standardParser is robfig/cron's parser for classic 5-field expressions (no seconds).
var standardParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// ScheduleExpression turns what a user wrote into an EventBridge Scheduler expression:
//   - a classic 5-field cron ("30 3 * * 1-5") or a descriptor ("@daily"), validated with
//     robfig/cron and rewritten to EventBridge's 6-field cron(min hour dom month dow year),
//     whose day-of-week counts 1-7 from Sunday and which needs "?" in one of the day fields;
//   - cron(...) or rate(...) already in EventBridge syntax, checked for shape.
func ScheduleExpression(expr string) (string, error) {
	expr = strings.TrimSpace(expr)
	if m := rateRe.FindStringSubmatch(expr); m != nil {
		n, _ := strconv.Atoi(m[1])
		unit := m[2]
		if (n == 1) != !strings.HasSuffix(unit, "s") {
			return "", badf("cron %q: EventBridge wants rate(1 minute) or rate(N minutes)", clip(expr))
		}
		return expr, nil
	}
	if strings.HasPrefix(expr, "rate(") {
		return "", badf("cron %q: want rate(N minutes|hours|days)", clip(expr))
	}
	if m := cronRe.FindStringSubmatch(expr); m != nil {
		f := strings.Fields(m[1])
		if len(f) != 6 {
			return "", badf("cron %q: EventBridge cron(...) has 6 fields (minutes hours day-of-month month day-of-week year)", clip(expr))
		}
		for _, x := range f {
			if !ebFieldR.MatchString(x) {
				return "", badf("cron %q: bad field %q", clip(expr), clip(x))
			}
		}
		if (f[2] == "?") == (f[4] == "?") {
			return "", badf("cron %q: exactly one of day-of-month and day-of-week must be ?", clip(expr))
		}
		return "cron(" + strings.Join(f, " ") + ")", nil
	}
	if d, ok := descriptors[strings.ToLower(expr)]; ok {
		expr = d
	}
	f := strings.Fields(expr)
	if len(f) != 5 {
		return "", badf("cron %q: want 5 fields (minute hour day-of-month month day-of-week), a descriptor such as @daily, or cron(...)/rate(...)", clip(expr))
	}
	if _, err := standardParser.Parse(expr); err != nil {
		return "", badf("cron %q: %v", clip(expr), err)
	}
	for _, x := range f {
		if strings.Contains(x, "?") {
			return "", badf("cron %q: ? is not valid in a 5-field cron", clip(expr))
		}
	}
	dom, dow := f[2], f[4]
	switch {
	case dow == "*":
		dow = "?"
	case dom == "*":
		dom = "?"
		var err error
		if dow, err = ebDow(dow); err != nil {
			return "", badf("cron %q: %v", clip(expr), err)
		}
	default:
		// Classic cron runs when either day field matches; EventBridge cannot say that.
		return "", badf("cron %q: EventBridge cannot restrict both day-of-month and day-of-week; use * in one", clip(expr))
	}
	return "cron(" + strings.Join([]string{f[0], f[1], dom, f[3], dow, "*"}, " ") + ")", nil
}

// ebDow rewrites a classic day-of-week field (0-7, Sunday 0 or 7) to EventBridge's (1-7,
// Sunday 1). Names (MON-FRI) mean the same in both.
func ebDow(field string) (string, error) {
	parts := strings.Split(field, ",")
	for i, p := range parts {
		step := ""
		if j := strings.IndexByte(p, '/'); j >= 0 {
			p, step = p[:j], p[j:]
		}
		lo, hi, isRange := strings.Cut(p, "-")
		conv := func(s string) (string, int, error) {
			if s == "*" {
				return s, 0, nil
			}
			n, err := strconv.Atoi(s)
			if err != nil {
				return strings.ToUpper(s), -1, nil // a name
			}
			if n == 7 {
				n = 0
			}
			return strconv.Itoa(n + 1), n + 1, nil
		}
		a, an, err := conv(lo)
		if err != nil {
			return "", err
		}
		if isRange {
			b, bn, err := conv(hi)
			if err != nil {
				return "", err
			}
			if an > 0 && bn > 0 && bn < an {
				if hi == "7" { // 5-7 is Friday to Sunday: FRI-SAT plus SUN
					parts[i] = a + "-7,1" + step
					if step != "" {
						return "", badf("day-of-week range %q with a step wraps past Saturday", p)
					}
					continue
				}
				return "", badf("day-of-week range %q wraps", p)
			}
			a = a + "-" + b
		}
		parts[i] = a + step
	}
	return strings.Join(parts, ","), nil
}

// loadTimezone validates an IANA timezone name; empty means UTC.
func loadTimezone(tz string) (string, error) {
	tz = strings.TrimSpace(tz)
	if tz == "" {
		return "UTC", nil
	}
	if tz == "Local" || strings.ContainsAny(tz, " \\") || strings.HasPrefix(tz, "/") || strings.Contains(tz, "..") {
		return "", badf("timezone %q: want an IANA name such as Europe/Paris", clip(tz))
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return "", badf("timezone %q: unknown (want an IANA name such as Europe/Paris)", clip(tz))
	}
	return tz, nil
}
