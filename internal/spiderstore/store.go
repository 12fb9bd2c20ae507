// Package spiderstore owns spiders as versioned data in Postgres: pushed spider specs
// (declarative and command, crawlq_spider), uploaded Scrapy project versions with their eggs
// (crawlq_project_version; the egg bytes in the row or behind the Eggs interface, e.g. S3), and
// what each run of a stored spider was scheduled with and ran (crawlq_spider_run: a client's job
// id, a pinned version, Scrapy settings, the version resolved, the command's pid).
//
// A Store is a spider.Source: every process resolves spiders through it at run time, so a push
// is seen by running workers without a restart. A spider of an uploaded project is named
// "<project>.<spider>"; spec spiders belong to the project "default" when a Scrapyd client asks.
package spiderstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/spider"
)

// Errors callers branch on.
var (
	// ErrNotFound: no such spider, project, version or run record.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the input was refused; nothing was written.
	ErrInvalid = errors.New("invalid")
	// ErrExists: the version (or job id) is taken.
	ErrExists = errors.New("already exists")
)

// DefaultProject is the project spec spiders belong to when a Scrapyd client asks.
const DefaultProject = "default"

// ScrapyProjectEnv is set in the CommandSpec.Env of a spider of an uploaded project to the
// project's name: the command runner fetches the run's egg version by it.
const ScrapyProjectEnv = "CRAWLQ_SCRAPY_PROJECT"

var (
	projectRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
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
	return &Store{cfg: cfg}, nil
}

// MaxEggBytes is the configured egg size limit.
func (s *Store) MaxEggBytes() int { return s.cfg.MaxEggBytes }

// File is a spec to push.
type File struct {
	Name string // where it came from, for error messages
	Data []byte
}

// Pushed is the outcome of pushing one spec.
type Pushed struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Unchanged bool   `json:"unchanged"` // same content as the newest version: no version added
}

// Validate checks a spec as Push would, reporting every mistake by field path (unknown fields
// too), as a *spider.ValidationError.
func Validate(data []byte, source string) (*spider.Spec, error) {
	var errs []spider.FieldError
	unknown := unknownFields(data)
	spec, err := spider.ParseSpec(data, source)
	if err != nil {
		var ve *spider.ValidationError
		if !errors.As(err, &ve) {
			return nil, err
		}
		for _, fe := range ve.Errors {
			// yaml.v3 names unknown fields by Go type and line; unknownFields names them by path.
			if strings.Contains(fe.Msg, " not found in type ") && len(unknown) > 0 {
				continue
			}
			errs = append(errs, fe)
		}
	}
	errs = append(unknown, errs...)
	if spec != nil {
		errs = append(errs, runnable(spec)...)
	}
	if len(errs) > 0 {
		return nil, &spider.ValidationError{Source: source, Errors: errs}
	}
	return spec, nil
}

// runnable refuses a command spider that no runner would take: queued to the Lambda workers it
// would wait forever.
func runnable(spec *spider.Spec) []spider.FieldError {
	if !spec.IsCommand() {
		return nil
	}
	var errs []spider.FieldError
	if spec.Runtime == spider.RuntimeLambda {
		errs = append(errs, spider.FieldError{Path: "runtime", Msg: "a command spider runs only on the ECS runner (crawlq runner); " +
			"remove runtime or set it to ecs: the Lambda workers cannot start a process"})
	}
	if spec.Queue == spider.DefaultQueue {
		errs = append(errs, spider.FieldError{Path: "queue", Msg: "queue crawl is worked by the Lambda workers, which cannot run a command; " +
			"remove queue (command spiders go to the runners' queue, long)"})
	}
	return errs
}

// Push validates and stores one spec. version "" numbers it (one more than the highest numbered
// version); a push whose content equals the newest version's adds nothing (Unchanged).
func (s *Store) Push(ctx context.Context, f File, version string) (Pushed, error) {
	out, err := s.PushAll(ctx, []File{f}, version)
	if err != nil {
		return Pushed{}, err
	}
	return out[0], nil
}

// PushAll validates every spec first and stores them in one transaction: one bad spec (or two
// with the same name) and nothing is stored; the error lists every mistake of every file.
func (s *Store) PushAll(ctx context.Context, files []File, version string) ([]Pushed, error) {
	if version != "" && !versionRE.MatchString(version) {
		return nil, fmt.Errorf("%w: version %q: want 1-64 of A-Z a-z 0-9 _ . + - starting with a letter or digit", ErrInvalid, clip(version))
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no spider specs to push", ErrInvalid)
	}
	specs := make([]*spider.Spec, len(files))
	var errs []error
	seen := map[string]string{}
	for i, f := range files {
		spec, err := Validate(f.Data, f.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[spec.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: name %q is also used by %s", f.Name, spec.Name, prev))
			continue
		}
		seen[spec.Name] = f.Name
		specs[i] = spec
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	var out []Pushed
	err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		out = out[:0]
		for i, spec := range specs {
			p, err := pushTx(ctx, tx, spec, files[i].Data, version)
			if err != nil {
				return err
			}
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func kindOf(spec *spider.Spec) string {
	if spec.IsCommand() {
		return spider.KindCommand
	}
	return spider.KindDeclarative
}

func pushTx(ctx context.Context, tx pgx.Tx, spec *spider.Spec, data []byte, version string) (Pushed, error) {
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	p := Pushed{Name: spec.Name, Kind: kindOf(spec)}
	latest, err := scanSpec(tx.QueryRow(ctx, sqlLatestSpec, spec.Name))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return p, fmt.Errorf("push %s: %w", spec.Name, err)
	}
	if err == nil && latest.SHA256 == sha && (version == "" || version == latest.Version) {
		p.Version, p.Unchanged = latest.Version, true
		return p, nil
	}
	if version == "" {
		var n int64
		if err := tx.QueryRow(ctx, sqlNextSpecVersion, spec.Name).Scan(&n); err != nil {
			return p, fmt.Errorf("push %s: %w", spec.Name, err)
		}
		version = fmt.Sprint(n)
	}
	var at time.Time
	err = tx.QueryRow(ctx, sqlInsertSpec, spec.Name, version, p.Kind, data, sha).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, fmt.Errorf("%w: spider %s version %s", ErrExists, spec.Name, version)
	}
	if err != nil {
		return p, fmt.Errorf("push %s: %w", spec.Name, err)
	}
	p.Version = version
	return p, nil
}

// Seed pushes the specs in the top directory of fsys (the built-in spiders) as version 1 of every
// name never stored before; names already stored (or pushed since) are left alone.
func (s *Store) Seed(ctx context.Context, fsys fs.FS) (int, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return 0, fmt.Errorf("seed spiders: %w", err)
	}
	n := 0
	for _, e := range entries {
		ext := strings.ToLower(path.Ext(e.Name()))
		if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		data, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return n, fmt.Errorf("seed spiders: %w", err)
		}
		spec, err := Validate(data, e.Name())
		if err != nil {
			return n, fmt.Errorf("seed spiders: %w", err)
		}
		sum := sha256.Sum256(data)
		tag, err := s.cfg.Pool.Exec(ctx, sqlSeedSpec, spec.Name, kindOf(spec), data, hex.EncodeToString(sum[:]))
		if err != nil {
			return n, fmt.Errorf("seed spider %s: %w", spec.Name, err)
		}
		n += int(tag.RowsAffected())
	}
	return n, nil
}

// Spec is one stored version of a spec.
type Spec struct {
	Name      string    `json:"name"`
	Version   string    `json:"version"`
	Kind      string    `json:"kind"`
	Data      []byte    `json:"-"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"created_at"`
}

func scanSpec(row pgx.Row) (Spec, error) {
	var sp Spec
	err := row.Scan(&sp.Name, &sp.Version, &sp.Kind, &sp.Data, &sp.SHA256, &sp.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return sp, ErrNotFound
	}
	return sp, err
}

// Get returns a version of a spec; version "" is the newest.
func (s *Store) Get(ctx context.Context, name, version string) (Spec, error) {
	var row pgx.Row
	if version == "" {
		row = s.cfg.Pool.QueryRow(ctx, sqlLatestSpec, name)
	} else {
		row = s.cfg.Pool.QueryRow(ctx, sqlSpecVersion, name, version)
	}
	sp, err := scanSpec(row)
	if errors.Is(err, ErrNotFound) {
		if version != "" {
			return sp, fmt.Errorf("spider %q version %q: %w", clip(name), clip(version), ErrNotFound)
		}
		return sp, fmt.Errorf("spider %q: %w", clip(name), ErrNotFound)
	}
	if err != nil {
		return sp, fmt.Errorf("get spider %s: %w", name, err)
	}
	return sp, nil
}

// Listed is one stored spider name.
type Listed struct {
	Name      string    `json:"name"`
	Kind      string    `json:"kind"` // declarative, command or scrapy
	Project   string    `json:"project"`
	Latest    string    `json:"latest_version"`
	Versions  int       `json:"versions"`
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// List lists stored spec spiders and the spiders of every project's newest version.
func (s *Store) List(ctx context.Context) ([]Listed, error) {
	rows, err := s.cfg.Pool.Query(ctx, sqlListSpecs)
	if err != nil {
		return nil, fmt.Errorf("list spiders: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Listed, error) {
		l := Listed{Project: DefaultProject}
		return l, r.Scan(&l.Name, &l.Latest, &l.Kind, &l.CreatedAt, &l.Versions)
	})
	if err != nil {
		return nil, fmt.Errorf("list spiders: %w", err)
	}
	projects, err := s.projectSpiders(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range projects {
		for _, sp := range p.spiders {
			out = append(out, Listed{Name: p.project + "." + sp, Kind: "scrapy", Project: p.project, Latest: p.version})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Versions lists a spec's versions, oldest first.
func (s *Store) Versions(ctx context.Context, name string) ([]string, error) {
	rows, err := s.cfg.Pool.Query(ctx, sqlSpecVersions, name)
	if err != nil {
		return nil, fmt.Errorf("list versions of %s: %w", name, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Delete deletes one version of a spec, or all of them when version is "". It says how many.
func (s *Store) Delete(ctx context.Context, name, version string) (int, error) {
	tag, err := s.cfg.Pool.Exec(ctx, sqlDeleteSpec, name, version)
	if err != nil {
		return 0, fmt.Errorf("delete spider %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		if version != "" {
			return 0, fmt.Errorf("spider %q version %q: %w", clip(name), clip(version), ErrNotFound)
		}
		return 0, fmt.Errorf("spider %q: %w", clip(name), ErrNotFound)
	}
	return int(tag.RowsAffected()), nil
}

// ---- Scrapy projects ----

// AddVersion stores a version of a Scrapy project from its egg, after checking the egg and
// listing its spiders. A version already uploaded is replaced (as Scrapyd does). Nothing is
// stored when any check fails.
func (s *Store) AddVersion(ctx context.Context, project, version string, egg []byte) ([]string, error) {
	if err := CheckProject(project); err != nil {
		return nil, err
	}
	if !versionRE.MatchString(version) {
		return nil, fmt.Errorf("%w: version %q: want 1-64 of A-Z a-z 0-9 _ . + - starting with a letter or digit", ErrInvalid, clip(version))
	}
	if len(egg) == 0 {
		return nil, fmt.Errorf("%w: egg is empty", ErrInvalid)
	}
	if len(egg) > s.cfg.MaxEggBytes {
		return nil, fmt.Errorf("%w: egg is %d bytes; the limit is %d", ErrInvalid, len(egg), s.cfg.MaxEggBytes)
	}
	info, err := ParseEgg(egg)
	if err != nil {
		return nil, err
	}
	spiders, err := s.cfg.Lister.List(ctx, egg, info)
	if err != nil {
		return nil, err
	}
	for _, sp := range spiders {
		if !scrapyNameRE.MatchString(sp) {
			return nil, fmt.Errorf("%w: spider name %q in the egg: crawlq takes 1-64 of A-Z a-z 0-9 _ . - starting with a letter or digit", ErrInvalid, clip(sp))
		}
	}
	if spiders == nil {
		spiders = []string{}
	}
	sum := sha256.Sum256(egg)
	var inline []byte
	ref := ""
	if s.cfg.Eggs != nil {
		ref = project + "/" + version + ".egg"
		if err := s.cfg.Eggs.Put(ctx, ref, egg); err != nil {
			return nil, err
		}
	} else {
		inline = egg
	}
	_, err = s.cfg.Pool.Exec(ctx, sqlInsertProjectVersion, project, version, spiders, len(egg), hex.EncodeToString(sum[:]), inline, ref)
	if err != nil {
		return nil, fmt.Errorf("add version %s %s: %w", project, version, err)
	}
	return spiders, nil
}

// CheckProject validates a project name.
func CheckProject(project string) error {
	if project == "" {
		return fmt.Errorf("%w: missing project", ErrInvalid)
	}
	if !projectRE.MatchString(project) {
		return fmt.Errorf("%w: project %q: want 1-64 of A-Z a-z 0-9 _ - starting with a letter or digit", ErrInvalid, clip(project))
	}
	return nil
}

// Projects lists the uploaded projects.
func (s *Store) Projects(ctx context.Context) ([]string, error) {
	rows, err := s.cfg.Pool.Query(ctx, sqlProjects)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ProjectVersions lists a project's versions, oldest first (ErrNotFound for no such project).
func (s *Store) ProjectVersions(ctx context.Context, project string) ([]string, error) {
	rows, err := s.cfg.Pool.Query(ctx, sqlProjectVersions, project)
	if err != nil {
		return nil, fmt.Errorf("list versions of %s: %w", project, err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list versions of %s: %w", project, err)
	}
	return vs, nil
}

// ProjectVersion is one uploaded version.
type ProjectVersion struct {
	Project, Version string
	Spiders          []string
	Size             int64
	SHA256           string
}

// GetProjectVersion reads a version of a project; version "" is the newest.
func (s *Store) GetProjectVersion(ctx context.Context, project, version string) (ProjectVersion, error) {
	pv := ProjectVersion{Project: project}
	var ref *string
	err := s.cfg.Pool.QueryRow(ctx, sqlProjectVersion, project, version).Scan(&pv.Version, &pv.Spiders, &pv.Size, &pv.SHA256, &ref)
	if errors.Is(err, pgx.ErrNoRows) {
		if version == "" {
			return pv, fmt.Errorf("project %q: %w", clip(project), ErrNotFound)
		}
		return pv, fmt.Errorf("project %q version %q: %w", clip(project), clip(version), ErrNotFound)
	}
	if err != nil {
		return pv, fmt.Errorf("get project %s: %w", project, err)
	}
	return pv, nil
}

// Egg returns the egg of a project version.
func (s *Store) Egg(ctx context.Context, project, version string) ([]byte, error) {
	var egg []byte
	var ref *string
	err := s.cfg.Pool.QueryRow(ctx, sqlProjectEgg, project, version).Scan(&egg, &ref)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("project %q version %q: %w", clip(project), clip(version), ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get egg %s %s: %w", project, version, err)
	}
	if ref != nil && *ref != "" {
		if s.cfg.Eggs == nil {
			return nil, fmt.Errorf("egg of %s %s is in an object store (%s) this process has no access to", project, version, *ref)
		}
		return s.cfg.Eggs.Get(ctx, *ref)
	}
	return egg, nil
}

// DeleteProject deletes one version of a project, or the whole project when version is "".
func (s *Store) DeleteProject(ctx context.Context, project, version string) error {
	rows, err := s.cfg.Pool.Query(ctx, sqlDeleteProjectVersion, project, version)
	if err != nil {
		return fmt.Errorf("delete project %s: %w", project, err)
	}
	refs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("delete project %s: %w", project, err)
	}
	if len(refs) == 0 {
		if version == "" {
			return fmt.Errorf("project %q: %w", clip(project), ErrNotFound)
		}
		return fmt.Errorf("project %q version %q: %w", clip(project), clip(version), ErrNotFound)
	}
	var errs []error
	for _, ref := range refs {
		if ref != "" && s.cfg.Eggs != nil {
			errs = append(errs, s.cfg.Eggs.Delete(ctx, ref))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete project %s: rows deleted, but: %w", project, err)
	}
	return nil
}

type projectSpiders struct {
	project, version string
	spiders          []string
}

func (s *Store) projectSpiders(ctx context.Context) ([]projectSpiders, error) {
	rows, err := s.cfg.Pool.Query(ctx, sqlProjectSpiders)
	if err != nil {
		return nil, fmt.Errorf("list project spiders: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (projectSpiders, error) {
		var p projectSpiders
		return p, r.Scan(&p.project, &p.version, &p.spiders)
	})
}

// ---- spider.Source ----

// SplitName splits "<project>.<spider>" (a spider of an uploaded project); ok is false for a
// spec spider's name.
func SplitName(name string) (project, spider string, ok bool) {
	p, s, ok := strings.Cut(name, ".")
	if !ok || !projectRE.MatchString(p) || s == "" {
		return "", "", false
	}
	return p, s, true
}

// ScrapyCommand is the command of a spider of an uploaded project: the command runner turns it
// into the full `scrapy crawl` line (internal/command).
func ScrapyCommand(project, name string) spider.CommandSpec {
	return spider.CommandSpec{Command: []string{"scrapy", "crawl", name}, Env: map[string]string{ScrapyProjectEnv: project}}
}

// Resolve implements spider.Source: the newest spec of name, or the newest project version
// holding the spider for "<project>.<spider>".
func (s *Store) Resolve(ctx context.Context, name string) (spider.Stored, error) {
	if project, sp, ok := SplitName(name); ok {
		var version string
		err := s.cfg.Pool.QueryRow(ctx, sqlLatestWithSpider, project, sp).Scan(&version)
		if errors.Is(err, pgx.ErrNoRows) {
			return spider.Stored{}, fmt.Errorf("spider %q: %w", clip(name), spider.ErrUnknownSpider)
		}
		if err != nil {
			return spider.Stored{}, fmt.Errorf("resolve %s: %w", name, err)
		}
		cmd := ScrapyCommand(project, sp)
		set := spider.DefaultSettings()
		set.Runtime, set.Queue = spider.RuntimeECS, ""
		return spider.Stored{Name: name, Version: version, Command: &cmd, Settings: set}, nil
	}
	sp, err := scanSpec(s.cfg.Pool.QueryRow(ctx, sqlLatestSpec, name))
	if errors.Is(err, ErrNotFound) {
		return spider.Stored{}, fmt.Errorf("spider %q: %w", clip(name), spider.ErrUnknownSpider)
	}
	if err != nil {
		return spider.Stored{}, fmt.Errorf("resolve %s: %w", name, err)
	}
	return spider.Stored{Name: name, Version: sp.Version, Spec: sp.Data}, nil
}

// Names implements spider.Source.
func (s *Store) Names(ctx context.Context) ([]string, error) {
	rows, err := s.cfg.Pool.Query(ctx, sqlSpecNames)
	if err != nil {
		return nil, fmt.Errorf("spider names: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("spider names: %w", err)
	}
	ps, err := s.projectSpiders(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		for _, sp := range p.spiders {
			names = append(names, p.project+"."+sp)
		}
	}
	sort.Strings(names)
	return names, nil
}

// ---- runs ----

// RunRecord is what a run of a stored spider was scheduled with and ran.
type RunRecord struct {
	RunID    int64             `json:"run_id"`
	Project  string            `json:"project"`
	Spider   string            `json:"spider"`
	Version  string            `json:"version"`
	JobID    string            `json:"jobid,omitempty"`
	Settings map[string]string `json:"settings,omitempty"` // Scrapy settings
	PID      int               `json:"pid,omitempty"`
}

// RecordRun stores what a run was scheduled with. A job id already used is ErrExists.
func (s *Store) RecordRun(ctx context.Context, r RunRecord) error {
	set := r.Settings
	if set == nil {
		set = map[string]string{}
	}
	b, _ := json.Marshal(set)
	_, err := s.cfg.Pool.Exec(ctx, sqlInsertRun, r.RunID, r.Project, r.Spider, r.Version, r.JobID, string(b))
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("%w: jobid %q is already used by another run", ErrExists, clip(r.JobID))
	}
	if err != nil {
		return fmt.Errorf("record run %d: %w", r.RunID, err)
	}
	return nil
}

// JobIDTaken reports which run uses a client's job id (0 if none).
func (s *Store) JobIDTaken(ctx context.Context, jobid string) (int64, error) {
	var id int64
	err := s.cfg.Pool.QueryRow(ctx, sqlRunByJobID, jobid).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("find jobid: %w", err)
	}
	return id, nil
}

func scanRun(r pgx.CollectableRow) (RunRecord, error) {
	var rr RunRecord
	var set []byte
	var pid *int32
	if err := r.Scan(&rr.RunID, &rr.Project, &rr.Spider, &rr.Version, &rr.JobID, &set, &pid); err != nil {
		return rr, err
	}
	if pid != nil {
		rr.PID = int(*pid)
	}
	return rr, json.Unmarshal(set, &rr.Settings)
}

// Run reads a run's record (ErrNotFound when it has none).
func (s *Store) Run(ctx context.Context, runID int64) (RunRecord, error) {
	rows, err := s.cfg.Pool.Query(ctx, sqlGetRun, runID)
	if err != nil {
		return RunRecord{}, fmt.Errorf("get run record %d: %w", runID, err)
	}
	rr, err := pgx.CollectOneRow(rows, scanRun)
	if errors.Is(err, pgx.ErrNoRows) {
		return rr, fmt.Errorf("run %d: %w", runID, ErrNotFound)
	}
	if err != nil {
		return rr, fmt.Errorf("get run record %d: %w", runID, err)
	}
	return rr, nil
}

// Runs reads the records of many runs, by run id (runs without one are absent).
func (s *Store) Runs(ctx context.Context, ids []int64) (map[int64]RunRecord, error) {
	rows, err := s.cfg.Pool.Query(ctx, sqlRunsGet, ids)
	if err != nil {
		return nil, fmt.Errorf("get run records: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("get run records: %w", err)
	}
	out := make(map[int64]RunRecord, len(list))
	for _, r := range list {
		out[r.RunID] = r
	}
	return out, nil
}

// StartRun records the version a run resolved to (a version pinned at schedule wins) and the
// pid of its command (0: none), and returns the version the run must use.
func (s *Store) StartRun(ctx context.Context, runID int64, project, name, version string, pid int) (string, error) {
	var v string
	if err := s.cfg.Pool.QueryRow(ctx, sqlStartRun, runID, project, name, version, pid).Scan(&v); err != nil {
		return "", fmt.Errorf("record run %d start: %w", runID, err)
	}
	return v, nil
}

func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
