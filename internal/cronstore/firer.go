package cronstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// markEvery is how often FireDue records that a process looks for due schedules: its looks come
// every second or sooner, and a reader needs to know only whether one looked within FirerHorizon.
const markEvery = 10 * time.Second

// FirerHorizon is how recently a process must have looked for due schedules (FireDue) to count
// as firing them.
const FirerHorizon = time.Minute

// markLooked records, at most every markEvery, that this process looks for due schedules.
func (s *Store) markLooked(ctx context.Context) error {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	due := s.marked.IsZero() || now.Sub(s.marked) >= markEvery
	if due {
		s.marked = now
	}
	s.mu.Unlock()
	if !due {
		return nil
	}
	_, err := s.cfg.Pool.Exec(ctx, `INSERT INTO crawlq_schedule_firer (id, seen_at) VALUES (true, now())
ON CONFLICT (id) DO UPDATE SET seen_at = EXCLUDED.seen_at`)
	if err != nil {
		s.mu.Lock()
		s.marked = time.Time{} // try again at the next look
		s.mu.Unlock()
		return fmt.Errorf("record the look for due schedules: %w", err)
	}
	return nil
}

// LastLook says how long ago a process last looked for due schedules to fire (by the database's
// clock), and false when none ever has.
func (s *Store) LastLook(ctx context.Context) (time.Duration, bool, error) {
	var secs float64
	err := s.cfg.Pool.QueryRow(ctx, `SELECT extract(epoch FROM now() - seen_at)::float8 FROM crawlq_schedule_firer`).Scan(&secs)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("last look for due schedules: %w", err)
	}
	return time.Duration(secs * float64(time.Second)), true, nil
}
