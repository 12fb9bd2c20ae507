// Package envconfig is where crawlq's processes turn their environment into configuration: the
// registry of every variable crawlq reads (Vars: name, default, meaning, the processes that read
// it; docs/configuration.md is generated from it), typed reading whose errors name the variable
// (Env), and the loaders of the settings several processes share (the database, maintenance, the
// ECS runner launcher). Domain packages never read the environment: the edges (cmd/, functions/,
// internal/cli and lambdafn's config loaders) build their structs here.
package envconfig

import (
	"crawlq/internal/proxy"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Env reads variables through a getenv function (os.Getenv at the edges; a map in tests). Every
// value is trimmed of surrounding space; an unset or blank variable takes the default given.
type Env struct {
	getenv func(string) string
}

// New returns an Env reading through getenv; nil reads an empty environment.
func New(getenv func(string) string) Env {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return Env{getenv: getenv}
}

// Map returns an Env over m (tests, and commands that override a variable).
func Map(m map[string]string) Env { return New(func(k string) string { return m[k] }) }

// Getenv is the underlying lookup, for a value passed on unparsed.
func (e Env) Getenv(name string) string { return e.getenv(name) }

// String returns the trimmed value of name, "" when unset.
func (e Env) String(name string) string { return strings.TrimSpace(e.getenv(name)) }

// StringOr returns the value of name, def when unset or blank.
func (e Env) StringOr(name, def string) string {
	if v := e.String(name); v != "" {
		return v
	}
	return def
}

// IsSet reports whether name has a non-blank value.
func (e Env) IsSet(name string) bool { return e.String(name) != "" }

// Errorf returns an error naming the variable: "NAME: <message>".
func Errorf(name, format string, args ...any) error {
	return fmt.Errorf("%s: "+format, append([]any{name}, args...)...)
}

// Int returns name as a non-negative integer, def when unset.
func (e Env) Int(name string, def int) (int, error) {
	v := e.String(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, Errorf(name, "not a non-negative integer: %q", v)
	}
	return n, nil
}

// PositiveInt returns name as an integer of at least 1, def when unset.
func (e Env) PositiveInt(name string, def int) (int, error) {
	v := e.String(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, Errorf(name, "not a positive integer: %q", v)
	}
	return n, nil
}

// Duration returns name as a positive Go duration ("24h", "90s"), def when unset.
func (e Env) Duration(name string, def time.Duration) (time.Duration, error) {
	v := e.String(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, Errorf(name, "not a positive duration such as 24h: %q", v)
	}
	return d, nil
}

// Bool returns name as true or false (strconv.ParseBool's spellings), def when unset.
func (e Env) Bool(name string, def bool) (bool, error) {
	v := e.String(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, Errorf(name, "not true or false: %q", v)
	}
	return b, nil
}

// List returns name split at commas, blanks dropped; nil when unset.
func (e Env) List(name string) []string {
	var out []string
	for _, p := range strings.Split(e.getenv(name), ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// OnOff returns name as a switch: "on", "true", "1" (and unset) are on; "off", "false", "0" off.
func (e Env) OnOff(name string) (bool, error) {
	switch v := e.String(name); v {
	case "", "on", "true", "1":
		return true, nil
	case "off", "false", "0":
		return false, nil
	default:
		return false, Errorf(name, "not on or off: %q", v)
	}
}

// ProxyEnv returns the variables of environ (os.Environ() at the edges) that spiders' proxy URLs
// may name: those starting with proxy.EnvPrefix (crawl.Config.ProxyEnv).
func ProxyEnv(environ []string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, proxy.EnvPrefix) {
			env[k] = v
		}
	}
	return env
}
