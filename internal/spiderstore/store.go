// Package spiderstore owns spiders as versioned data in Postgres: pushed spider specs
// (declarative and command, crawlq_spider), uploaded Scrapy project versions with their eggs
// (crawlq_project_version; the egg bytes in the row or behind the Eggs interface, e.g. S3), and
// what each run of a stored spider was scheduled with and ran (crawlq_spider_run: a client's job
// id, a pinned version, Scrapy settings, the version resolved, the command's pid).
//
// A Store is a spider.Source: every process resolves spiders through it at run time, so a push
// is seen by running workers without a restart. A spider of an uploaded project is named
// "<project>.<spider>"; spec spiders belong to the project "default" when a Scrapyd client asks.
// The queries are in internal/dbsqlc: crawlq_spider.sql, crawlq_project_version.sql and
// crawlq_spider_run.sql. Files: specs.go (spider specs), projects.go and egg.go (Scrapy projects
// and their eggs), resolve.go (spider.Source), runs.go (run records).
package spiderstore

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/dbsqlc"
)

// Errors callers branch on.
var (
	// ErrNotFound: no such spider, project, version or run record.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the input was refused; nothing was written.
	ErrInvalid = errors.New("invalid")
	// ErrExists: the version (or job id) is taken.
	ErrExists = errors.New("already exists")
	// ErrInUse: a run that has not finished needs what was to be deleted.
	ErrInUse = errors.New("in use")
)

// DefaultProject is the project spec spiders belong to when a Scrapyd client asks.
const DefaultProject = "default"

// ScrapyProjectEnv is set in the CommandSpec.Env of a spider of an uploaded project to the
// project's name: the command runner fetches the run's egg version by it.
const ScrapyProjectEnv = "CRAWLQ_SCRAPY_PROJECT"

var (
	versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$`)
	// Scrapy spider names as crawlq accepts them from an egg.
	scrapyNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// Config wires a Store. Pool is required.
type Config struct {
	Pool *pgxpool.Pool
	// Eggs keeps egg bytes outside Postgres. Default nil: in crawlq_project_version.egg.
	Eggs Eggs
	// Lister finds an egg's spiders at upload. Default AutoLister.
	Lister Lister
	// MaxEggBytes bounds an egg. Default 50 MiB.
	MaxEggBytes int
}

// Store is the spider store. It is safe for concurrent use.
type Store struct {
	cfg Config
	db  *dbsqlc.Queries // on cfg.Pool
}

// New returns a Store.
func New(cfg Config) (*Store, error) {
	if cfg.Pool == nil {
		return nil, errors.New("spiderstore: Pool is required")
	}
	if cfg.MaxEggBytes < 0 {
		return nil, fmt.Errorf("spiderstore: MaxEggBytes %d is negative", cfg.MaxEggBytes)
	}
	if cfg.MaxEggBytes == 0 {
		cfg.MaxEggBytes = 50 << 20
	}
	if cfg.Lister == nil {
		cfg.Lister = AutoLister{}
	}
	return &Store{cfg: cfg, db: dbsqlc.New(cfg.Pool)}, nil
}

// MaxEggBytes is the configured egg size limit.
func (s *Store) MaxEggBytes() int { return s.cfg.MaxEggBytes }
