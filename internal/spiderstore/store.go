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
// crawlq_spider_run.sql.
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
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/dbsqlc"
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
		return nil, &invalidSpecs{errs: errs}
	}
	var out []Pushed
	err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		out = out[:0]
		for i, spec := range specs {
			p, err := pushTx(ctx, s.db.WithTx(tx), spec, files[i].Data, version)
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

// invalidSpecs is PushAll's refusal: errors.Is(err, ErrInvalid), and Unwrap lists only the
// problems themselves (one per bad file), so a caller walking them (crawlq spider push) reports
// exactly those, not ErrInvalid as a problem of its own.
type invalidSpecs struct{ errs []error }

func (e *invalidSpecs) Error() string {
	return ErrInvalid.Error() + ": " + errors.Join(e.errs...).Error()
}

func (e *invalidSpecs) Unwrap() []error { return e.errs }

func (e *invalidSpecs) Is(target error) bool { return target == ErrInvalid }

func kindOf(spec *spider.Spec) string {
	if spec.IsCommand() {
		return spider.KindCommand
	}
	return spider.KindDeclarative
}

func pushTx(ctx context.Context, db *dbsqlc.Queries, spec *spider.Spec, data []byte, version string) (Pushed, error) {
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	p := Pushed{Name: spec.Name, Kind: kindOf(spec)}
	latest, err := specFrom(db.LatestSpec(ctx, spec.Name))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return p, fmt.Errorf("push %s: %w", spec.Name, err)
	}
	if err == nil && latest.SHA256 == sha && (version == "" || version == latest.Version) {
		p.Version, p.Unchanged = latest.Version, true
		return p, nil
	}
	if version == "" {
		n, err := db.NextSpecVersion(ctx, spec.Name)
		if err != nil {
			return p, fmt.Errorf("push %s: %w", spec.Name, err)
		}
		version = fmt.Sprint(n)
	}
	_, err = db.InsertSpec(ctx, dbsqlc.InsertSpecParams{Name: spec.Name, Version: version, Kind: p.Kind, Spec: data, Sha256: sha})
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
		seeded, err := s.db.SeedSpec(ctx, dbsqlc.SeedSpecParams{Name: spec.Name, Kind: kindOf(spec), Spec: data, Sha256: hex.EncodeToString(sum[:])})
		if err != nil {
			return n, fmt.Errorf("seed spider %s: %w", spec.Name, err)
		}
		n += int(seeded)
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

// specFrom turns a stored row into a Spec; no row is ErrNotFound.
func specFrom(row dbsqlc.CrawlqSpider, err error) (Spec, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return Spec{}, ErrNotFound
	}
	if err != nil {
		return Spec{}, err
	}
	return Spec{Name: row.Name, Version: row.Version, Kind: row.Kind, Data: row.Spec, SHA256: row.Sha256, CreatedAt: row.CreatedAt}, nil
}

// Get returns a version of a spec; version "" is the newest.
func (s *Store) Get(ctx context.Context, name, version string) (Spec, error) {
	var sp Spec
	var err error
	if version == "" {
		sp, err = specFrom(s.db.LatestSpec(ctx, name))
	} else {
		sp, err = specFrom(s.db.SpecVersion(ctx, dbsqlc.SpecVersionParams{Name: name, Version: version}))
	}
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
	rows, err := s.db.ListSpecs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list spiders: %w", err)
	}
	out := make([]Listed, 0, len(rows))
	for _, r := range rows {
		out = append(out, Listed{Name: r.Name, Kind: r.Kind, Project: DefaultProject, Latest: r.Version, Versions: int(r.Versions), CreatedAt: r.CreatedAt})
	}
	projects, err := s.projectSpiders(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range projects {
		for _, sp := range p.spiders {
			out = append(out, Listed{Name: SpiderName(p.project, sp), Kind: "scrapy", Project: p.project, Latest: p.version})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Versions lists a spec's versions, oldest first.
func (s *Store) Versions(ctx context.Context, name string) ([]string, error) {
	vs, err := s.db.SpecVersions(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("list versions of %s: %w", name, err)
	}
	return vs, nil
}

// Delete deletes one version of a spec, or all of them when version is "". It says how many.
func (s *Store) Delete(ctx context.Context, name, version string) (int, error) {
	n, err := s.db.DeleteSpec(ctx, dbsqlc.DeleteSpecParams{Name: name, Version: version})
	if err != nil {
		return 0, fmt.Errorf("delete spider %s: %w", name, err)
	}
	if n == 0 {
		if version != "" {
			return 0, fmt.Errorf("spider %q version %q: %w", clip(name), clip(version), ErrNotFound)
		}
		return 0, fmt.Errorf("spider %q: %w", clip(name), ErrNotFound)
	}
	return int(n), nil
}

// ---- Scrapy projects ----

// AddVersion stores a version of a Scrapy project from its egg, after checking the egg and
// listing its spiders. A version already uploaded is replaced (as Scrapyd does). Nothing is
// stored when any check fails.
func (s *Store) AddVersion(ctx context.Context, project, version string, egg []byte) ([]string, error) {
	if err := CheckProject(project); err != nil {
		return nil, err
	}
	if err := CheckProjectVersion(version); err != nil {
		return nil, err
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
		ref = eggRef(project, version)
		if err := s.cfg.Eggs.Put(ctx, ref, egg); err != nil {
			return nil, err
		}
	} else {
		inline = egg
	}
	err = s.db.InsertProjectVersion(ctx, dbsqlc.InsertProjectVersionParams{
		Project: project, Version: version, Spiders: spiders, Size: int64(len(egg)), Sha256: hex.EncodeToString(sum[:]),
		Egg: inline, EggRef: ref,
	})
	if err != nil {
		return nil, fmt.Errorf("add version %s %s: %w", project, version, err)
	}
	return spiders, nil
}

// Projects lists the uploaded projects.
func (s *Store) Projects(ctx context.Context) ([]string, error) {
	ps, err := s.db.Projects(ctx)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return ps, nil
}

// ProjectVersions lists a project's versions in Scrapyd's order (SortVersions): the last is the
// highest, the one runs use by default. None for no such project.
func (s *Store) ProjectVersions(ctx context.Context, project string) ([]string, error) {
	vs, err := s.db.ProjectVersions(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("list versions of %s: %w", project, err)
	}
	return SortVersions(vs), nil
}

// ProjectVersion is one uploaded version.
type ProjectVersion struct {
	Project, Version string
	Spiders          []string
	Size             int64
	SHA256           string
}

// GetProjectVersion reads a version of a project; version "" is the highest in Scrapyd's order
// (SortVersions), as Scrapyd runs by default.
func (s *Store) GetProjectVersion(ctx context.Context, project, version string) (ProjectVersion, error) {
	pv := ProjectVersion{Project: project}
	if version == "" {
		vs, err := s.ProjectVersions(ctx, project)
		if err != nil {
			return pv, err
		}
		if len(vs) == 0 {
			return pv, fmt.Errorf("project %q: %w", clip(project), ErrNotFound)
		}
		version = vs[len(vs)-1]
	}
	row, err := s.db.ProjectVersion(ctx, dbsqlc.ProjectVersionParams{Project: project, Version: version})
	if errors.Is(err, pgx.ErrNoRows) {
		if version == "" {
			return pv, fmt.Errorf("project %q: %w", clip(project), ErrNotFound)
		}
		return pv, fmt.Errorf("project %q version %q: %w", clip(project), clip(version), ErrNotFound)
	}
	if err != nil {
		return pv, fmt.Errorf("get project %s: %w", project, err)
	}
	pv.Version, pv.Spiders, pv.Size, pv.SHA256 = row.Version, row.Spiders, row.Size, row.Sha256
	return pv, nil
}

// Egg returns the egg of a project version.
func (s *Store) Egg(ctx context.Context, project, version string) ([]byte, error) {
	row, err := s.db.ProjectEgg(ctx, dbsqlc.ProjectEggParams{Project: project, Version: version})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("project %q version %q: %w", clip(project), clip(version), ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get egg %s %s: %w", project, version, err)
	}
	if row.EggRef != "" {
		if s.cfg.Eggs == nil {
			return nil, fmt.Errorf("egg of %s %s is in an object store (%s) this process has no access to", project, version, row.EggRef)
		}
		return s.cfg.Eggs.Get(ctx, row.EggRef)
	}
	return row.Egg, nil
}

// DeleteProject deletes one version of a project, or the whole project when version is "".
func (s *Store) DeleteProject(ctx context.Context, project, version string) error {
	refs, err := s.db.DeleteProjectVersion(ctx, dbsqlc.DeleteProjectVersionParams{Project: project, Version: version})
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

// projectSpiders lists every project's highest version (SortVersions) and its spiders.
func (s *Store) projectSpiders(ctx context.Context) ([]projectSpiders, error) {
	rows, err := s.db.ProjectSpiders(ctx)
	if err != nil {
		return nil, fmt.Errorf("list project spiders: %w", err)
	}
	versions := map[string][]string{}
	spiders := map[[2]string][]string{}
	var projects []string
	for _, r := range rows {
		if versions[r.Project] == nil {
			projects = append(projects, r.Project)
		}
		versions[r.Project] = append(versions[r.Project], r.Version)
		spiders[[2]string{r.Project, r.Version}] = r.Spiders
	}
	out := make([]projectSpiders, 0, len(projects))
	for _, p := range projects {
		vs := SortVersions(versions[p])
		top := vs[len(vs)-1]
		out = append(out, projectSpiders{project: p, version: top, spiders: spiders[[2]string{p, top}]})
	}
	return out, nil
}

// ---- spider.Source ----

// ScrapyCommand is the command of a spider of an uploaded project: the command runner turns it
// into the full `scrapy crawl` line (internal/command).
func ScrapyCommand(project, name string) spider.CommandSpec {
	return spider.CommandSpec{Command: []string{"scrapy", "crawl", name}, Env: map[string]string{ScrapyProjectEnv: project}}
}

// Resolve implements spider.Source: a version of a spec ("" the newest), or for
// "<project>.<spider>" a version of the project holding the spider ("" the newest that does). A
// version the spider lacks wraps spider.ErrUnknownVersion and says which versions there are.
func (s *Store) Resolve(ctx context.Context, name, version string) (spider.Stored, error) {
	if project, sp, ok := SplitName(name); ok {
		return s.resolveProject(ctx, name, project, sp, version)
	}
	var row dbsqlc.CrawlqSpider
	var err error
	if version == "" {
		row, err = s.db.LatestSpec(ctx, name)
	} else {
		row, err = s.db.SpecVersion(ctx, dbsqlc.SpecVersionParams{Name: name, Version: version})
	}
	sp, err := specFrom(row, err)
	if errors.Is(err, ErrNotFound) {
		if version == "" {
			return spider.Stored{}, fmt.Errorf("spider %q: %w", clip(name), spider.ErrUnknownSpider)
		}
		vs, err := s.Versions(ctx, name)
		if err != nil {
			return spider.Stored{}, fmt.Errorf("resolve %s: %w", name, err)
		}
		if len(vs) == 0 {
			return spider.Stored{}, fmt.Errorf("spider %q: %w", clip(name), spider.ErrUnknownSpider)
		}
		return spider.Stored{}, fmt.Errorf("%w %q of spider %q (its versions: %s)", spider.ErrUnknownVersion, clip(version), clip(name), listVersions(vs))
	}
	if err != nil {
		return spider.Stored{}, fmt.Errorf("resolve %s: %w", name, err)
	}
	return spider.Stored{Name: name, Version: sp.Version, Spec: sp.Data}, nil
}

// resolveProject resolves a spider of an uploaded project.
func (s *Store) resolveProject(ctx context.Context, name, project, sp, version string) (spider.Stored, error) {
	// The highest version (Scrapyd's order) that has the spider.
	rows, err := s.db.ProjectVersionSpiders(ctx, project)
	if err != nil {
		return spider.Stored{}, fmt.Errorf("resolve %s: %w", name, err)
	}
	var with []string
	for _, r := range rows {
		if slices.Contains(r.Spiders, sp) {
			with = append(with, r.Version)
		}
	}
	if len(with) == 0 {
		return spider.Stored{}, fmt.Errorf("spider %q: %w", clip(name), spider.ErrUnknownSpider)
	}
	latest := SortVersions(with)[len(with)-1]
	if version != "" && version != latest {
		pv, err := s.GetProjectVersion(ctx, project, version)
		if errors.Is(err, ErrNotFound) {
			return spider.Stored{}, fmt.Errorf("%w %q of project %q", spider.ErrUnknownVersion, clip(version), project)
		}
		if err != nil {
			return spider.Stored{}, fmt.Errorf("resolve %s: %w", name, err)
		}
		if !slices.Contains(pv.Spiders, sp) {
			return spider.Stored{}, fmt.Errorf("%w %q of project %q: it has no spider %q (its spiders: %v)", spider.ErrUnknownVersion, clip(version), project, clip(sp), pv.Spiders)
		}
		latest = version
	}
	cmd := ScrapyCommand(project, sp)
	set := spider.DefaultSettings()
	set.Runtime, set.Queue = spider.RuntimeECS, ""
	return spider.Stored{Name: name, Version: latest, Command: &cmd, Settings: set}, nil
}

// listVersions shows a spider's versions in an error: the last ten, newest last.
func listVersions(vs []string) string {
	if len(vs) > 10 {
		return "..., " + strings.Join(vs[len(vs)-10:], ", ")
	}
	return strings.Join(vs, ", ")
}

// Names implements spider.Source.
func (s *Store) Names(ctx context.Context) ([]string, error) {
	names, err := s.db.SpecNames(ctx)
	if err != nil {
		return nil, fmt.Errorf("spider names: %w", err)
	}
	ps, err := s.projectSpiders(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		for _, sp := range p.spiders {
			names = append(names, SpiderName(p.project, sp))
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

// RecordRun stores what a run was scheduled with. The crawl may have recorded the run's version
// already (pinned when it scheduled the run, or the one it started with): that version is kept.
// A job id already used is ErrExists.
func (s *Store) RecordRun(ctx context.Context, r RunRecord) error {
	set := r.Settings
	if set == nil {
		set = map[string]string{}
	}
	b, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("record run %d: %w", r.RunID, err)
	}
	err = s.db.InsertSpiderRun(ctx, dbsqlc.InsertSpiderRunParams{
		RunID: r.RunID, Project: r.Project, Spider: r.Spider, Version: r.Version, Jobid: r.JobID, Settings: string(b),
	})
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
	id, err := s.db.SpiderRunByJobID(ctx, jobid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("find jobid: %w", err)
	}
	return id, nil
}

// runRecord decodes a stored run record.
func runRecord(row dbsqlc.CrawlqSpiderRun) (RunRecord, error) {
	rr := RunRecord{RunID: row.RunID, Project: row.Project, Spider: row.Spider, Version: row.Version,
		JobID: row.Jobid.String, PID: int(row.Pid.Int32)}
	if err := json.Unmarshal(row.Settings, &rr.Settings); err != nil {
		return rr, fmt.Errorf("run %d settings: %w", row.RunID, err)
	}
	return rr, nil
}

// Run reads a run's record (ErrNotFound when it has none).
func (s *Store) Run(ctx context.Context, runID int64) (RunRecord, error) {
	row, err := s.db.GetSpiderRun(ctx, runID)
	if errors.Is(err, pgx.ErrNoRows) {
		return RunRecord{}, fmt.Errorf("run %d: %w", runID, ErrNotFound)
	}
	if err != nil {
		return RunRecord{}, fmt.Errorf("get run record %d: %w", runID, err)
	}
	return runRecord(row)
}

// Runs reads the records of many runs, by run id (runs without one are absent).
func (s *Store) Runs(ctx context.Context, ids []int64) (map[int64]RunRecord, error) {
	rows, err := s.db.SpiderRuns(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("get run records: %w", err)
	}
	out := make(map[int64]RunRecord, len(rows))
	for _, row := range rows {
		r, err := runRecord(row)
		if err != nil {
			return nil, fmt.Errorf("get run records: %w", err)
		}
		out[r.RunID] = r
	}
	return out, nil
}

// StartRun records the version a run resolved to (a version pinned at schedule wins) and the
// pid of its command (0: none), and returns the version the run must use.
func (s *Store) StartRun(ctx context.Context, runID int64, project, name, version string, pid int) (string, error) {
	v, err := s.db.StartSpiderRun(ctx, dbsqlc.StartSpiderRunParams{RunID: runID, Project: project, Spider: name, Version: version, Pid: int32(pid)})
	if err != nil {
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
