package spiderstore

// Spider specs: pushing (validated first, one transaction for a set), seeding the built-in
// ones, reading, listing and deleting their versions.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/spider"
)

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
// too, with the nearest known field), as a *spider.ValidationError.
func Validate(data []byte, source string) (*spider.Spec, error) {
	spec, err := spider.ParseSpec(data, source)
	if err != nil {
		return nil, err
	}
	if errs := runnable(spec); len(errs) > 0 {
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

// Version is one stored version of a spec.
type Version struct {
	Version  string
	PushedAt time.Time
	SHA256   string // of the spec as pushed
}

// Versions lists a spec's versions, oldest first.
func (s *Store) Versions(ctx context.Context, name string) ([]Version, error) {
	rows, err := s.db.SpecVersions(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("list versions of %s: %w", name, err)
	}
	vs := make([]Version, len(rows))
	for i, r := range rows {
		vs[i] = Version{Version: r.Version, PushedAt: r.CreatedAt, SHA256: r.Sha256}
	}
	return vs, nil
}

// Delete deletes one version of a spec, or all of them when version is "". It says how many.
// A version a run that has not finished pinned or started with (any version, for all of them) is
// not deleted from under it: that is ErrInUse, naming the runs, and nothing is deleted.
func (s *Store) Delete(ctx context.Context, name, version string) (int, error) {
	n, err := s.db.DeleteSpec(ctx, dbsqlc.DeleteSpecParams{Name: name, Version: version})
	if err != nil {
		return 0, fmt.Errorf("delete spider %s: %w", name, err)
	}
	if n == 0 {
		runs, err := s.db.SpecRunsInUse(ctx, dbsqlc.SpecRunsInUseParams{Name: name, Version: version})
		if err != nil {
			return 0, fmt.Errorf("delete spider %s: %w", name, err)
		}
		if len(runs) > 0 {
			what := fmt.Sprintf("spider %q", clip(name))
			if version != "" {
				what = fmt.Sprintf("spider %q version %q", clip(name), clip(version))
			}
			ids := make([]string, len(runs))
			for i, id := range runs {
				ids[i] = strconv.FormatInt(id, 10)
			}
			return 0, fmt.Errorf("%s: %w: runs that have not finished need it (%s); cancel them (crawlq cancel-run ID) or let them finish first",
				what, ErrInUse, strings.Join(ids, ", "))
		}
		if version != "" {
			return 0, fmt.Errorf("spider %q version %q: %w", clip(name), clip(version), ErrNotFound)
		}
		return 0, fmt.Errorf("spider %q: %w", clip(name), ErrNotFound)
	}
	return int(n), nil
}
