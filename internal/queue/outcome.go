package queue

import (
	"errors"
	"fmt"
	"time"

	"crawlq/internal/backoff"
)

// What a handler's error asks of the worker (see Handler).

type snoozeError struct{ d time.Duration }

func (e *snoozeError) Error() string { return fmt.Sprintf("snooze %s", e.d) }

// Snooze returns an error that tells the worker to put the job back for d without counting the attempt.
func Snooze(d time.Duration) error { return &snoozeError{d: max(d, 0)} }

// IsPermanent reports whether err marks its job dead at once (see Permanent).
func IsPermanent(err error) bool {
	var je *jobError
	return errors.As(err, &je) && je.permanent
}

type jobError struct {
	err       error
	retryIn   time.Duration
	permanent bool
	deferred  bool // not the job's fault: put back without counting the attempt
	cancel    bool // the job is cancelled
}

func (e *jobError) Error() string { return e.err.Error() }
func (e *jobError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: the job is dead at once.
func Permanent(err error) error { return &jobError{err: err, permanent: true} }

// RetryIn marks err as a failed attempt to retry after d (for example a server's Retry-After).
func RetryIn(err error, d time.Duration) error { return &jobError{err: err, retryIn: d} }

// Defer marks err as a fault that is not the job's own, such as the database refusing
// connections: the job is put back to run again after a short backoff (shared by the worker's
// jobs, growing while such faults go on) without counting the attempt, so an outage of the
// database does not use up the retry budget of the jobs that met it.
func Defer(err error) error { return &jobError{err: err, deferred: true} }

// Decided reports whether err already says what becomes of its job: an error from Snooze,
// Permanent, RetryIn, Defer or Cancel.
func Decided(err error) bool {
	var se *snoozeError
	var je *jobError
	return errors.As(err, &se) || errors.As(err, &je)
}

// IsDeferred reports whether err was marked with Defer.
func IsDeferred(err error) bool {
	var je *jobError
	return errors.As(err, &je) && je.deferred
}

// Cancel marks err as the cancellation of the job (its run was cancelled): it ends cancelled.
func Cancel(err error) error { return &jobError{err: err, cancel: true} }

// deferBackoff is how long a job deferred after the worker's n-th fault in a row waits: 200 ms,
// doubling, at most 2 s (so work resumes within seconds of the fault clearing), with jitter so the
// jobs that met one outage do not come back at once.
func deferBackoff(n int64) time.Duration {
	return backoff.Policy{Base: 200 * time.Millisecond, Max: 2 * time.Second, Jitter: true}.Delay(int(min(max(n, 1), 64)))
}
