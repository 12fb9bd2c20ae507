// Package artifact keeps what a failed rendered page looked like, its screenshot (PNG) and its
// HTML, for the operator, beside the run's log: in Postgres (crawlq_run_artifact, the local
// stack and any runner without a bucket) or, with a bucket, the files in S3 under
// artifacts/runs/<run>/ and their index in Postgres. The index bounds what a run keeps (MaxPages
// pages, each file at most MaxFileBytes), across processes.
//
// It knows nothing of browsers or pages' retries: internal/crawl says what to keep.
package artifact

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/dbsqlc"
)

// The bound of one run: at most MaxPages failed pages, each file at most MaxFileBytes, so a run
// keeps at most MaxPages*2*MaxFileBytes (40 MiB).
const (
	MaxPages     = 20
	MaxFileBytes = 1 << 20
)

// Sentinel errors callers branch on.
var (
	// ErrFull: the run keeps MaxPages pages already; nothing more is kept for it.
	ErrFull = errors.New("the run keeps the most failed pages it may")
	// ErrNotFound: no such artifact.
	ErrNotFound = errors.New("no such artifact")
)

// Page is what a failed page looked like.
type Page struct {
	RunID   int64
	JobID   int64
	Attempt int
	URL     string
	Err     string
	At      time.Time
	// Screenshot is a PNG (nil: none was taken). One over MaxFileBytes is not kept (said in
	// Kept.Files and the listing: png_bytes 0).
	Screenshot []byte
	// HTML is the page's DOM as it was; cut at MaxFileBytes.
	HTML []byte
}

// name is the artifact name of a page job's nth kept failure (from 1): page-<job>-<n>. Its files
// are name+".png" and name+".html".
func name(jobID int64, n int) string { return fmt.Sprintf("page-%d-%d", jobID, n) }

// Info describes a kept page.
type Info struct {
	Name      string // page-<job>-<n>: the page job's nth kept failure
	JobID     int64
	Attempt   int
	URL       string
	Err       string
	At        time.Time
	PNGBytes  int
	HTMLBytes int
	Truncated bool   // the HTML was cut at MaxFileBytes
	Location  string // "" (in Postgres) or s3://bucket/prefix/ holding the files
}

// Files are the names of the files kept for a page.
func (i Info) Files() []string {
	var f []string
	if i.PNGBytes > 0 {
		f = append(f, i.Name+".png")
	}
	if i.HTMLBytes > 0 {
		f = append(f, i.Name+".html")
	}
	return f
}

// Store keeps artifacts. Pool is required; with Blobs set the files go there (S3), else into
// Postgres.
type Store struct {
	Pool  *pgxpool.Pool
	Blobs Blobs
}

// Blobs holds files out of Postgres: S3.
type Blobs interface {
	// Put writes a run's file and returns the location of the run's files (the same for every
	// file of a run).
	Put(ctx context.Context, runID int64, file, contentType string, data []byte) (location string, err error)
	// Get reads a file from a location Put returned.
	Get(ctx context.Context, location, file string) ([]byte, error)
}

// Keep stores p within its run's bound and returns what was kept. It returns ErrFull, keeping
// nothing, when the run has MaxPages pages already.
func (s Store) Keep(ctx context.Context, p Page) (Info, error) {
	info := Info{JobID: p.JobID, Attempt: p.Attempt, URL: p.URL, Err: p.Err, At: p.At}
	png, html := p.Screenshot, p.HTML
	if len(png) > MaxFileBytes {
		png = nil
	}
	if len(html) > MaxFileBytes {
		html, info.Truncated = html[:MaxFileBytes], true
	}
	info.PNGBytes, info.HTMLBytes = len(png), len(html)
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		return Info{}, fmt.Errorf("keep a failed page of run %d: %w", p.RunID, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	q := dbsqlc.New(tx)
	if err := q.LockRunArtifacts(ctx, p.RunID); err != nil {
		return Info{}, fmt.Errorf("keep a failed page of run %d: lock: %w", p.RunID, err)
	}
	n, err := q.CountRunArtifacts(ctx, p.RunID)
	if err != nil {
		return Info{}, fmt.Errorf("keep a failed page of run %d: count: %w", p.RunID, err)
	}
	if int(n) >= MaxPages {
		return Info{}, fmt.Errorf("keep a failed page of run %d: %w (%d)", p.RunID, ErrFull, MaxPages)
	}
	mine, err := q.CountJobArtifacts(ctx, dbsqlc.CountJobArtifactsParams{RunID: p.RunID, JobID: p.JobID})
	if err != nil {
		return Info{}, fmt.Errorf("keep a failed page of run %d: count: %w", p.RunID, err)
	}
	info.Name = name(p.JobID, int(mine)+1)
	arg := dbsqlc.InsertRunArtifactParams{RunID: p.RunID, Name: info.Name, JobID: p.JobID, Attempt: int32(p.Attempt), Url: p.URL, Error: p.Err, At: p.At,
		PngBytes: int32(len(png)), HtmlBytes: int32(len(html)), Truncated: info.Truncated}
	if s.Blobs == nil {
		arg.Png, arg.Html = png, html
	} else {
		for _, f := range []struct {
			ext, ct string
			data    []byte
		}{{".png", "image/png", png}, {".html", "text/html; charset=utf-8", html}} {
			if len(f.data) == 0 {
				continue
			}
			if arg.Location, err = s.Blobs.Put(ctx, p.RunID, info.Name+f.ext, f.ct, f.data); err != nil {
				return Info{}, fmt.Errorf("keep %s of run %d: %w", info.Name, p.RunID, err)
			}
		}
		info.Location = arg.Location
	}
	if _, err := q.InsertRunArtifact(ctx, arg); err != nil {
		return Info{}, fmt.Errorf("keep %s of run %d: %w", info.Name, p.RunID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Info{}, fmt.Errorf("keep %s of run %d: commit: %w", info.Name, p.RunID, err)
	}
	return info, nil
}

// List returns a run's kept pages, in the order they failed.
func (s Store) List(ctx context.Context, runID int64) ([]Info, error) {
	rows, err := dbsqlc.New(s.Pool).ListRunArtifacts(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("list artifacts of run %d: %w", runID, err)
	}
	out := make([]Info, len(rows))
	for i, r := range rows {
		out[i] = Info{Name: r.Name, JobID: r.JobID, Attempt: int(r.Attempt), URL: r.Url, Err: r.Error, At: r.At, PNGBytes: int(r.PngBytes), HTMLBytes: int(r.HtmlBytes),
			Truncated: r.Truncated, Location: r.Location}
	}
	return out, nil
}

// Read returns one file of a run's artifacts: a name Info.Files lists (page-<job>-<n>.png or
// .html). A file kept in S3 is read through Blobs, which must then be set.
func (s Store) Read(ctx context.Context, runID int64, file string) ([]byte, error) {
	name, ext, ok := cut(file)
	if !ok {
		return nil, fmt.Errorf("artifact %q: %w (names end in .png or .html)", file, ErrNotFound)
	}
	r, err := dbsqlc.New(s.Pool).GetRunArtifact(ctx, dbsqlc.GetRunArtifactParams{RunID: runID, Name: name})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("artifact %s of run %d: %w", file, runID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("artifact %s of run %d: %w", file, runID, err)
	}
	if r.Location != "" {
		if s.Blobs == nil {
			return nil, fmt.Errorf("artifact %s of run %d is in %s: no S3 client to read it", file, runID, r.Location)
		}
		return s.Blobs.Get(ctx, r.Location, file)
	}
	data := r.Png
	if ext == ".html" {
		data = r.Html
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("artifact %s of run %d: %w (not taken)", file, runID, ErrNotFound)
	}
	return data, nil
}

// cut splits a file name into its artifact name and extension.
func cut(file string) (name, ext string, ok bool) {
	for _, e := range []string{".png", ".html"} {
		if n, found := strings.CutSuffix(file, e); found && n != "" {
			return n, e, true
		}
	}
	return "", "", false
}
