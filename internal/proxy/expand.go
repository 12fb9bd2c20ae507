package proxy

import (
	"fmt"
	"regexp"
	"strings"
)

// EnvPrefix is the prefix of the environment variables a proxy URL may name: ${CRAWLQ_PROXY_PASS}.
// Only these: a spider's author must not be able to send the runner's other variables (its
// database URL, its cloud credentials) to a proxy of their choosing.
const EnvPrefix = "CRAWLQ_PROXY_"

var envRef = regexp.MustCompile(`\$\{([^}]*)\}`)

// Expand replaces each ${NAME} in raw by lookup(NAME): how a spec keeps a proxy's credentials
// out of itself (the runner's environment holds them; on ECS, from Secrets Manager through the
// task definition's secrets). NAME must start with EnvPrefix; a variable that is not set is an
// error naming it.
func Expand(raw string, lookup func(string) (string, bool)) (string, error) {
	var err error
	out := envRef.ReplaceAllStringFunc(raw, func(m string) string {
		name := m[2 : len(m)-1]
		switch {
		case err != nil:
			return m
		case !strings.HasPrefix(name, EnvPrefix) || len(name) == len(EnvPrefix) || strings.ContainsFunc(name, notEnvChar):
			err = fmt.Errorf("${%s}: a proxy URL may name only environment variables %s<NAME> (letters, digits, _)", name, EnvPrefix)
			return m
		}
		v, ok := lookup(name)
		if !ok {
			err = fmt.Errorf("${%s}: the environment variable is not set on this runner", name)
			return m
		}
		return v
	})
	if err != nil {
		return "", err
	}
	return out, nil
}

func notEnvChar(r rune) bool {
	return !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
}

// Placeholder is a lookup for checking a proxy URL where its variables are not set (at push):
// each is taken for "x".
func Placeholder(string) (string, bool) { return "x", true }

// ParseExpanded fills raw's ${CRAWLQ_PROXY_...} variables through lookup (Expand) and parses
// the URL it makes (Parse): a spider's proxy as the push checks it, the crawler dials it and
// crawlq spider test uses it.
func ParseExpanded(raw string, lookup func(string) (string, bool)) (*Proxy, error) {
	exp, err := Expand(raw, lookup)
	if err != nil {
		return nil, err
	}
	return Parse(exp)
}

// Lookup looks variables up in env, the CRAWLQ_PROXY_ variables a process was given at its edge.
func Lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}
