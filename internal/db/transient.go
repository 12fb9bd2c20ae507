package db

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsTransient reports whether err is a fault of the database or of the way to it, not of the
// work being done: the server refused or dropped the connection, is shutting down or starting
// up, has too many clients, or aborted a transaction that would succeed if run again
// (serialization failure, deadlock). Work that failed this way should be retried later without
// being counted against its own retry budget.
//
// A context's own cancellation or deadline is not transient: the caller stopped waiting.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08": // connection exception
			return true
		case "53": // insufficient resources: too many connections, out of memory or disk
			return true
		case "57": // operator intervention: admin/crash shutdown, cannot connect now
			return pe.Code != "57014" // query_canceled is the caller's statement timeout
		case "40": // transaction rollback: serialization failure, deadlock
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || (errors.As(err, &ne) && ne.Timeout()) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, pgconn.ErrConnClosed)
}
