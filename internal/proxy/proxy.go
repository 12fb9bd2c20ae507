// Package proxy is the outbound proxies a spider's requests go through: their URLs (http://,
// https://, socks5://, with optional user:password), checked and printed only with the password
// redacted; a dialer that reaches a target through one (an HTTP CONNECT tunnel, or SOCKS5 through
// golang.org/x/net/proxy); and a Rotation that hands them out in turn and rests one that fails
// or is banned, with a backoff.
//
// It judges no addresses: the caller (internal/fetch) decides which target and which proxy
// address may be reached, and gives the dialer only a target it has resolved and checked, so a
// proxy cannot be asked for a name that resolves elsewhere on its side.
package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Schemes are the proxy URL schemes Parse takes.
var Schemes = []string{"http", "https", "socks5"}

// Proxy is one parsed proxy URL. Its String is safe to log: the password is redacted.
type Proxy struct {
	Scheme   string // http, https or socks5
	Host     string // host name or IP, without brackets
	Port     string // always set: the scheme's default (http 80, https 443, socks5 1080) when the URL gave none
	User     string // "" when the URL has no credentials
	Password string
	hasPass  bool
}

// Parse reads a proxy URL: scheme://[user[:password]@]host[:port], with nothing after the
// address (a path, query or fragment is refused: a proxy has none). Its error never contains
// the password.
func Parse(raw string) (*Proxy, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url's error quotes the whole URL, password and all.
		return nil, fmt.Errorf("proxy %s: not a URL", Redact(raw))
	}
	scheme := strings.ToLower(u.Scheme)
	p := &Proxy{Scheme: scheme, Host: u.Hostname(), Port: u.Port()}
	switch scheme {
	case "http":
		p.Port = or(p.Port, "80")
	case "https":
		p.Port = or(p.Port, "443")
	case "socks5":
		p.Port = or(p.Port, "1080")
	case "socks5h":
		return nil, fmt.Errorf("proxy %s: socks5h (names resolved by the proxy) is not supported: crawlq resolves and checks each target itself and gives the proxy its address; use socks5://", p)
	default:
		return nil, fmt.Errorf("proxy %s: scheme %q is not one of %s", Redact(raw), u.Scheme, strings.Join(Schemes, ", "))
	}
	if u.User != nil {
		p.User = u.User.Username()
		p.Password, p.hasPass = u.User.Password()
	}
	switch {
	case p.Host == "":
		return nil, fmt.Errorf("proxy %s: no host", p)
	case u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("proxy %s: a proxy URL has no path, query or fragment", p)
	}
	if n, err := strconv.Atoi(p.Port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("proxy %s: port %q is not 1..65535", p, p.Port)
	}
	if scheme == "socks5" && (len(p.User) > 255 || len(p.Password) > 255) {
		return nil, fmt.Errorf("proxy %s: SOCKS5 user and password are at most 255 bytes each", p)
	}
	return p, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return net.JoinHostPort(p.Host, p.Port) }

// String is the URL with its password replaced by "xxxxx": what logs, events and errors show.
func (p *Proxy) String() string {
	u := url.URL{Scheme: p.Scheme, Host: p.Addr()}
	switch {
	case p.hasPass:
		u.User = url.UserPassword(p.User, "xxxxx")
	case p.User != "":
		u.User = url.User(p.User)
	}
	return u.String()
}

// Redact returns raw with the password of a URL in it replaced by "xxxxx", for a value that
// may not parse: everything between the scheme's "//" and the last "@" before the host is
// taken for credentials.
func Redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			return u.Redacted()
		}
		return raw
	}
	i := strings.Index(raw, "//")
	if i < 0 {
		i = -2
	}
	rest := raw[i+2:]
	end := len(rest)
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		end = j
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return raw
	}
	return raw[:i+2] + user + ":xxxxx" + rest[at:]
}

// ErrProxy: the proxy itself failed: it could not be reached, refused the credentials, or would
// not open a tunnel to the target. The target is not to blame; another proxy may get through.
var ErrProxy = errors.New("proxy failed")

// Error is a failure of a proxy. It matches ErrProxy; Proxy is the redacted URL.
type Error struct {
	Proxy string
	Err   error
}

func (e *Error) Error() string        { return fmt.Sprintf("proxy %s: %v", e.Proxy, e.Err) }
func (e *Error) Unwrap() error        { return e.Err }
func (e *Error) Is(target error) bool { return target == ErrProxy }
