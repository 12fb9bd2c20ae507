package spider

import (
	"context"
	"crawlq/internal/clock"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// Registry maps names to spiders: in-process ones (declarative and Go) and command ones.
// With a Source (SetSource), names are resolved at run time from stored spiders first, so a
// spider pushed while the process runs is seen within the source's TTL, without a restart; the
// spiders registered in-process (built-in specs, --spiders DIR, Go spiders) are the fallback
// for names the source does not hold. A stored version can be asked for by name (Resolve), so a
// run keeps the version it started with. It is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	spiders  map[string]Spider
	commands map[string]commandEntry
	monitors map[string]Monitors // declared by loaded specs (monitors.go)

	src      Source
	ttl      time.Duration
	clk      clock.Clock
	log      *slog.Logger
	cached   map[cacheKey]*resolved // guarded by mu
	compiled map[[32]byte]*built    // by the SHA-256 of a stored spec; guarded by mu
	flight   singleflight.Group     // loads from src, one per name and version at a time

	// failing counts the source's failed calls since it last answered: the first one of a streak
	// is logged, and the next answer says the source is back.
	failing atomic.Int64
}

// Stored is a spider as a Source holds it: one version of a spec, or of a command.
type Stored struct {
	Name    string
	Version string
	// Spec is a declarative or command spec (YAML or JSON), as pushed. Nil when Command is set.
	Spec []byte
	// Command and Settings describe a spider that has no spec (a spider of an uploaded Scrapy
	// project).
	Command  *CommandSpec
	Settings Settings
}

// Source supplies stored spiders (internal/spiderstore). Resolve returns one version of name,
// the newest when version is "": an error wrapping ErrUnknownSpider when the source holds no
// such name, ErrUnknownVersion when it holds the name but not that version.
type Source interface {
	Resolve(ctx context.Context, name, version string) (Stored, error)
	Names(ctx context.Context) ([]string, error)
}

// DefaultSourceTTL is how long a name resolved from a Source is used before asking again.
const DefaultSourceTTL = 2 * time.Second

// SourceConfig says where a Registry finds stored spiders (SetSource).
type SourceConfig struct {
	// Source holds the stored spiders. Required.
	Source Source
	// TTL is how long an answer of the source is used before asking again. Default
	// DefaultSourceTTL (2s).
	TTL time.Duration
	// Clock tells when an answer was cached and when its TTL is over. Default the wall clock;
	// tests move a stopped one past the TTL instead of waiting it out.
	Clock clock.Clock
	// Logger receives a warning when the source starts failing (once per outage, not per call)
	// and a line when it answers again. Default slog.Default().
	Logger *slog.Logger
}

// cacheKey is a name and a version; version "" is whatever is newest.
type cacheKey struct{ name, version string }

// resolved is one cached answer of the source.
type resolved struct {
	at      time.Time
	missing error // the source holds no such name or version: its error, else nil
	version string
	built   *built
}

// built is what one stored spider compiles to: versions of equal content share it.
type built struct {
	spider   Spider // nil for a command spider
	command  *commandEntry
	monitors Monitors
}

type commandEntry struct {
	spec     CommandSpec
	settings Settings
}

// Resolved is one version of a spider, as the registry found it.
type Resolved struct {
	Name string
	// Version is the stored version; "" for a spider known only in-process.
	Version string
	// Spider is the in-process spider; nil for a command spider.
	Spider Spider
	// Command and Settings describe a command spider; Command is nil for the others.
	Command  *CommandSpec
	Settings Settings
	// Monitors are the checks this version declares on its runs.
	Monitors Monitors
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{spiders: map[string]Spider{}, commands: map[string]commandEntry{},
		cached: map[cacheKey]*resolved{}, compiled: map[[32]byte]*built{}}
}

// SetSource makes the registry resolve names from cfg.Source first. While the source fails, the
// registry answers from its last good answers and its in-process spiders, and says so in one
// warning per outage; the error reaches a caller only when it knows the name nowhere.
func (r *Registry) SetSource(cfg SourceConfig) {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultSourceTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.src, r.ttl, r.clk, r.log = cfg.Source, cfg.TTL, clock.Or(cfg.Clock), cfg.Logger
	clear(r.cached)
}

// Forget drops every answer cached from the Source, so the next lookup of each name asks it
// again: a process told that spiders were pushed (crawlq local, woken by crawlq spider push)
// uses them at once instead of within the TTL, a name that was unknown too.
func (r *Registry) Forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.cached)
}

// HasSource reports whether SetSource was called.
func (r *Registry) HasSource() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.src != nil
}

// sourceFailed notes a failed call of the source; the first of a streak is logged.
func (r *Registry) sourceFailed(op string, err error) {
	if r.failing.Add(1) != 1 {
		return
	}
	r.mu.RLock()
	log := r.log
	r.mu.RUnlock()
	log.Warn("spider store unreachable: answering from cached and in-process spiders until it answers "+
		"(stored spiders not cached here are unknown meanwhile, and spider listings leave them out)", "op", op, "err", err)
}

// sourceAnswered notes an answer of the source, ending a streak of failures.
func (r *Registry) sourceAnswered() {
	if n := r.failing.Swap(0); n > 0 {
		r.mu.RLock()
		log := r.log
		r.mu.RUnlock()
		log.Info("spider store answers again", "failed_calls", n)
	}
}

// resolve returns the source's current answer for a version of name ("" the newest): nil without
// a source, or when the source fails and has never answered for it.
func (r *Registry) resolve(name, version string) (*resolved, error) {
	key := cacheKey{name, version}
	r.mu.RLock()
	src, ttl, clk, c := r.src, r.ttl, r.clk, r.cached[key]
	r.mu.RUnlock()
	if src == nil {
		return nil, nil
	}
	if c != nil && clock.Since(clk, c.at) < ttl {
		return c, nil
	}
	// One load per name and version at a time: when the cache expires under a burst (200
	// schedules of one spider at once), the others wait for its answer instead of each querying
	// the store and compiling the spec again.
	v, err, _ := r.flight.Do(name+"\x00"+version, func() (any, error) { return r.load(src, clk, key, c) })
	if err != nil {
		return nil, err
	}
	return v.(*resolved), nil
}

// load asks the source for key and caches its answer, stamped by clk; c is the stale answer, if any.
func (r *Registry) load(src Source, clk clock.Clock, key cacheKey, c *resolved) (*resolved, error) {
	name, version := key.name, key.version
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := src.Resolve(ctx, name, version)
	if errors.Is(err, ErrUnknownSpider) || errors.Is(err, ErrUnknownVersion) {
		r.sourceAnswered()
		n := &resolved{at: clk.Now(), missing: err}
		r.store(key, n)
		return n, nil
	}
	if err != nil {
		r.sourceFailed("resolve "+name, err)
		if c != nil {
			return c, nil // stale beats nothing while the store is unreachable
		}
		return nil, fmt.Errorf("resolve spider %q: %w", name, err)
	}
	r.sourceAnswered()
	b, err := r.build(name, st)
	if err != nil {
		return nil, err
	}
	n := &resolved{at: clk.Now(), version: st.Version, built: b}
	r.store(key, n)
	return n, nil
}

// build compiles a stored spider, or reuses what an earlier version of equal content compiled to.
func (r *Registry) build(name string, st Stored) (*built, error) {
	if st.Command != nil {
		cmd := *st.Command
		cmd.Command = append([]string(nil), cmd.Command...)
		cmd.Env = maps.Clone(cmd.Env)
		return &built{command: &commandEntry{spec: cmd, settings: st.Settings}}, nil
	}
	sum := sha256.Sum256(st.Spec)
	r.mu.RLock()
	b := r.compiled[sum]
	r.mu.RUnlock()
	if b != nil {
		return b, nil
	}
	unusable := func(err error) error {
		return fmt.Errorf("spider %q version %s: %w (%w): %w", name, st.Version, ErrUnusableSpider, ErrUnknownSpider, err)
	}
	spec, err := ParseSpec(st.Spec, name+"@"+st.Version)
	if err != nil {
		return nil, unusable(err)
	}
	b = &built{}
	if spec.Monitors != nil {
		b.monitors = *spec.Monitors
	}
	if spec.IsCommand() {
		cs, _ := spec.CommandSpec()
		set, _ := spec.Settings()
		b.command = &commandEntry{spec: cs, settings: set}
	} else if b.spider, err = Compile(spec); err != nil {
		return nil, unusable(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.compiled) > 1000 { // a bound, not an LRU: specs are few and compile cheaply
		clear(r.compiled)
	}
	r.compiled[sum] = b
	return b, nil
}

func (r *Registry) store(key cacheKey, n *resolved) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cached) > 10000 { // a bound, not an LRU: names are few and reload cheaply
		clear(r.cached)
	}
	r.cached[key] = n
}

// Resolve returns a version of the spider called name. Version "" is the newest: the source's
// when it holds name, else the in-process spider. Any other version must be stored: a version
// the source does not hold is an error wrapping ErrUnknownVersion that names it. A name known
// nowhere is ErrUnknownSpider; a stored spec that no longer compiles is ErrUnusableSpider (and
// ErrUnknownSpider); any other error is the source's (it failed and the name is known nowhere
// else), worth a retry.
func (r *Registry) Resolve(name, version string) (Resolved, error) {
	n, err := r.resolve(name, version)
	if version != "" {
		switch {
		case err != nil:
			return Resolved{}, err
		case (n == nil || errors.Is(n.missing, ErrUnknownSpider)) && r.inProcess(name):
			return Resolved{}, fmt.Errorf("%w %q of spider %q: it is not stored, only loaded in this process; push it to pin versions",
				ErrUnknownVersion, version, name)
		case n == nil:
			return Resolved{}, fmt.Errorf("spider %q: %w", name, ErrUnknownSpider)
		case n.missing != nil:
			return Resolved{}, n.missing
		}
		return n.resolved(name), nil
	}
	if n != nil && n.missing == nil {
		return n.resolved(name), nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if s, ok := r.spiders[name]; ok {
		return Resolved{Name: name, Spider: s, Settings: s.Settings(), Monitors: r.inProcessMonitors(name)}, nil
	}
	if e, ok := r.commands[name]; ok {
		cmd := e.spec
		cmd.Command = append([]string(nil), cmd.Command...)
		return Resolved{Name: name, Command: &cmd, Settings: e.settings, Monitors: r.inProcessMonitors(name)}, nil
	}
	if err != nil {
		return Resolved{}, err
	}
	return Resolved{}, fmt.Errorf("spider %q: %w", name, ErrUnknownSpider)
}

// inProcess reports whether name is registered in this process.
func (r *Registry) inProcess(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.taken(name)
}

// resolved is the answer as callers see it.
func (n *resolved) resolved(name string) Resolved {
	out := Resolved{Name: name, Version: n.version, Monitors: n.built.monitors}
	if n.built.spider != nil {
		out.Spider, out.Settings = n.built.spider, n.built.spider.Settings()
		return out
	}
	cmd := n.built.command.spec
	cmd.Command = append([]string(nil), cmd.Command...)
	out.Command, out.Settings = &cmd, n.built.command.settings
	return out
}

// Version returns the stored version that name currently resolves to ("" for a spider known
// only in-process).
func (r *Registry) Version(name string) string {
	res, err := r.Resolve(name, "")
	if err != nil {
		return ""
	}
	return res.Version
}

// Register adds an in-process spider after checking its name and settings.
func (r *Registry) Register(s Spider) error {
	if s == nil {
		return errors.New("register spider: nil spider")
	}
	name := s.Name()
	if !nameRE.MatchString(name) {
		return fmt.Errorf("register spider: name %q does not match %s", name, nameRE)
	}
	if err := s.Settings().Validate(); err != nil {
		return fmt.Errorf("register spider %s: %w", name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.taken(name) {
		return fmt.Errorf("register spider %s: %w", name, ErrDuplicate)
	}
	r.spiders[name] = s
	return nil
}

// RegisterCommand declares a command spider; the ECS runner runs it.
func (r *Registry) RegisterCommand(name string, settings Settings, spec CommandSpec) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("register command spider: name %q does not match %s", name, nameRE)
	}
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return fmt.Errorf("register command spider %s: empty command", name)
	}
	if spec.Timeout < 0 {
		return fmt.Errorf("register command spider %s: negative timeout", name)
	}
	if err := settings.Validate(); err != nil {
		return fmt.Errorf("register command spider %s: %w", name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.taken(name) {
		return fmt.Errorf("register command spider %s: %w", name, ErrDuplicate)
	}
	spec.Command = append([]string(nil), spec.Command...)
	r.commands[name] = commandEntry{spec: spec, settings: settings}
	return nil
}

func (r *Registry) taken(name string) bool {
	_, a := r.spiders[name]
	_, b := r.commands[name]
	return a || b
}

// Lookup returns the in-process spider called name (its newest version): ErrUnknownSpider if
// there is none, ErrCommandSpider if name is a command spider.
func (r *Registry) Lookup(name string) (Spider, error) {
	res, err := r.Resolve(name, "")
	if err != nil {
		return nil, err
	}
	if res.Spider == nil {
		return nil, fmt.Errorf("look up spider %q: %w: run it with the ECS runner", name, ErrCommandSpider)
	}
	return res.Spider, nil
}

// Command returns the command spider called name (its newest version).
func (r *Registry) Command(name string) (CommandSpec, Settings, bool) {
	res, err := r.Resolve(name, "")
	if err != nil || res.Command == nil {
		return CommandSpec{}, Settings{}, false
	}
	return *res.Command, res.Settings, true
}

// Names returns every name, sorted: the source's (when it answers; a failure is logged once per
// outage) and the in-process ones. It asks the source for every name: to check one name, use
// Resolve, which is cached.
func (r *Registry) Names() []string {
	r.mu.RLock()
	src := r.src
	set := make(map[string]bool, len(r.spiders)+len(r.commands))
	for n := range r.spiders {
		set[n] = true
	}
	for n := range r.commands {
		set[n] = true
	}
	r.mu.RUnlock()
	if src != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		stored, err := src.Names(ctx)
		cancel()
		if err != nil {
			r.sourceFailed("list names", err)
		} else {
			r.sourceAnswered()
			for _, n := range stored {
				set[n] = true
			}
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LoadDir registers every *.yaml, *.yml and *.json spec in dir (not recursive). It is
// all or nothing: if any spec is invalid or a name is taken, nothing is registered and
// the error lists every problem, file by file.
func (r *Registry) LoadDir(dir string) error {
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("load spiders: %w", err)
	}
	return r.LoadFS(os.DirFS(dir))
}

// LoadFS is LoadDir for the top directory of fsys (an embedded set of specs, for one).
func (r *Registry) LoadFS(fsys fs.FS) error {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return fmt.Errorf("load spiders: %w", err)
	}
	type loaded struct {
		file     string
		spider   Spider
		name     string
		monitors *Monitors
		command  CommandSpec
		settings Settings
	}
	var all []loaded
	var errs []error
	seen := map[string]string{}
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		data, err := readLimited(fsys, e.Name())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		spec, err := ParseSpec(data, e.Name())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[spec.Name]; dup {
			errs = append(errs, fmt.Errorf("load spiders: %s: name %q already used by %s: %w", e.Name(), spec.Name, prev, ErrDuplicate))
			continue
		}
		seen[spec.Name] = e.Name()
		l := loaded{file: e.Name(), name: spec.Name, monitors: spec.Monitors}
		if spec.IsCommand() {
			l.command, _ = spec.CommandSpec()
			l.settings, _ = spec.Settings()
		} else if l.spider, err = Compile(spec); err != nil {
			errs = append(errs, err)
			continue
		}
		all = append(all, l)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range all {
		if r.taken(l.name) {
			errs = append(errs, fmt.Errorf("load spiders: %s: %w: %s", l.file, ErrDuplicate, l.name))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, l := range all {
		if l.spider != nil {
			r.spiders[l.name] = l.spider
		} else {
			r.commands[l.name] = commandEntry{spec: l.command, settings: l.settings}
		}
		r.setMonitors(l.name, l.monitors)
	}
	return nil
}

// maxSpecBytes bounds a spec file; real specs are a few kilobytes.
const maxSpecBytes = 1 << 20

func readLimited(fsys fs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load spiders: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSpecBytes+1))
	if err != nil {
		return nil, fmt.Errorf("load spiders: read %s: %w", path, err)
	}
	if len(data) > maxSpecBytes {
		return nil, fmt.Errorf("load spiders: %s: larger than %d bytes", path, maxSpecBytes)
	}
	return data, nil
}
