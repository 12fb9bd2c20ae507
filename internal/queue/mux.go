package queue

import (
	"context"
	"errors"
	"fmt"
)

// ErrUnknownKind is the (permanent) failure of a job whose kind no handler is registered for.
var ErrUnknownKind = errors.New("queue: no handler for job kind")

// Mux routes jobs to handlers by kind, as http.ServeMux routes requests by path. Register every
// handler before the worker starts; a Mux is not safe for concurrent registration.
type Mux struct {
	m map[string]Handler
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{m: map[string]Handler{}} }

// Handle registers h for kind, replacing any earlier handler.
func (m *Mux) Handle(kind string, h Handler) { m.m[kind] = h }

// Work is a Handler that dispatches on the job's kind. A job of an unknown kind is dead at once:
// retrying cannot help until a worker that knows the kind is deployed, and redrive brings it back.
func (m *Mux) Work(ctx context.Context, j *Job) error {
	h, ok := m.m[j.Kind]
	if !ok {
		return Permanent(fmt.Errorf("%w %q", ErrUnknownKind, j.Kind))
	}
	return h(ctx, j)
}

// Noop is a handler that succeeds at once (benchmarks and the demo).
func Noop(context.Context, *Job) error { return nil }
