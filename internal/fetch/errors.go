package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"crawlq/internal/proxy"
)

// Sentinel errors callers branch on. Match them with errors.Is.
var (
	// ErrScheme: the URL (or a redirect target) is not http or https.
	ErrScheme = errors.New("unsupported url scheme")
	// ErrInvalidURL: the URL does not parse or has no host.
	ErrInvalidURL = errors.New("invalid url")
	// ErrBodyTooLarge: the decoded body exceeds Config.MaxBodyBytes.
	ErrBodyTooLarge = errors.New("response body too large")
	// ErrTooManyRedirects: more than Config.MaxRedirects redirects, or a loop.
	ErrTooManyRedirects = errors.New("too many redirects")
	// ErrRedirectLoop: a redirect pointed back to a URL already visited in this
	// Fetch. It also matches ErrTooManyRedirects.
	ErrRedirectLoop = fmt.Errorf("%w: redirect loop", ErrTooManyRedirects)
	// ErrForbiddenAddress: the host resolved to an address that is not public
	// (loopback, private, link-local, cloud metadata...) and the Config does not
	// allow it. No packet was sent to it. The error is a *RefusedError naming the
	// address and its kind.
	ErrForbiddenAddress = errors.New("forbidden address")
	// ErrTimeout: Config.ReadTimeout elapsed (or a connect/TLS timeout fired).
	ErrTimeout = errors.New("read timeout")
	// ErrContentEncoding: the server used a Content-Encoding we did not ask for.
	ErrContentEncoding = errors.New("unsupported content encoding")
)

// maxRetryAfter caps a server's Retry-After so one response cannot park a job for
// days.
const maxRetryAfter = time.Hour

// StatusError is returned (with the Result) for a final HTTP status >= 400.
type StatusError struct {
	// Code is the HTTP status code.
	Code int
	// RetryAfter is the server's Retry-After hint, capped at one hour; zero when
	// absent or unparseable.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("http status %d (retry after %s)", e.Code, e.RetryAfter)
	}
	return fmt.Sprintf("http status %d", e.Code)
}

func newStatusError(resp *http.Response, now time.Time) *StatusError {
	se := &StatusError{Code: resp.StatusCode}
	if v := resp.Header.Get("Retry-After"); v != "" {
		// Measure an HTTP date against the server's own clock when it sent one, so
		// clock skew between us and the server does not distort the wait.
		if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
			now = d
		}
		se.RetryAfter, _ = parseRetryAfter(v, now)
	}
	return se
}

// parseRetryAfter reads delta-seconds or an HTTP date, capped at maxRetryAfter.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	switch {
	case d < 0:
		return 0, true
	case d > maxRetryAfter:
		return maxRetryAfter, true
	}
	return d, true
}

// RetryAfter reports the server's Retry-After hint carried by err, if any.
func RetryAfter(err error) (time.Duration, bool) {
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > 0 {
		return se.RetryAfter, true
	}
	return 0, false
}

// Retryable reports whether trying the same URL later might succeed: timeouts,
// connection failures, 408, 429 and 5xx, and the caller's own cancellation (the
// page did not fail). Other 4xx, oversized bodies, redirect trouble, forbidden
// addresses, bad URLs, unknown hosts and TLS certificate failures are permanent.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code == http.StatusRequestTimeout || se.Code == http.StatusTooManyRequests || se.Code >= 500
	}
	switch Kind(err) {
	case "timeout", "canceled", "proxy":
		return true
	case "connect":
		return !permanentConnect(err)
	}
	return false
}

// permanentConnect picks out the connection failures that retrying will not fix.
func permanentConnect(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return true
	}
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidErr x509.CertificateInvalidError
	return errors.As(err, &certErr) || errors.As(err, &unknownAuth) ||
		errors.As(err, &hostErr) || errors.As(err, &invalidErr)
}

// Kind labels err for stats. The labels are stable: "timeout", "connect",
// "proxy" (the proxy failed: proxy.ErrProxy), "status_429", "status_5xx", "status_4xx", "too_large", "redirects", "forbidden",
// "scheme", "invalid_url", "canceled", "other"; "" for a nil error.
func Kind(err error) string {
	if err == nil {
		return ""
	}
	var se *StatusError
	switch {
	case errors.As(err, &se):
		switch {
		case se.Code == http.StatusTooManyRequests:
			return "status_429"
		case se.Code >= 500:
			return "status_5xx"
		}
		return "status_4xx"
	case errors.Is(err, proxy.ErrProxy):
		// Before forbidden and connect: a proxy whose address is refused or that cannot be
		// reached is the proxy's failure, not the page's or its host's.
		return "proxy"
	case errors.Is(err, ErrBodyTooLarge):
		return "too_large"
	case errors.Is(err, ErrTooManyRedirects):
		return "redirects"
	case errors.Is(err, ErrForbiddenAddress):
		return "forbidden"
	case errors.Is(err, ErrScheme):
		return "scheme"
	case errors.Is(err, ErrInvalidURL):
		return "invalid_url"
	case isTimeout(err):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case isConnect(err):
		return "connect"
	}
	return "other"
}

func isTimeout(err error) bool {
	if errors.Is(err, ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isConnect(err error) bool {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	return errors.As(err, &opErr) || errors.As(err, &dnsErr) ||
		errors.As(err, &certErr) || errors.As(err, &recErr) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		permanentConnect(err)
}

// IsStatus reports whether err is an HTTP status the server answered with (StatusError): the
// host is up, whatever the page's fate.
func IsStatus(err error) bool {
	var se *StatusError
	return errors.As(err, &se)
}

// IsHostFailure reports whether err says the host could not be reached at all, rather than that
// one page failed: the connection was refused, reset or could not be made in time, or the host's
// address could not be resolved for now. A slow page (a read timeout) or an error status is not.
func IsHostFailure(err error) bool {
	if err == nil || IsStatus(err) || !Retryable(err) || errors.Is(err, proxy.ErrProxy) {
		return false
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}
