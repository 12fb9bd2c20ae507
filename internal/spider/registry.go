package spider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Registry maps names to spiders: in-process ones (declarative and Go) and command ones.
// With a Source (SetSource), names are resolved at run time from stored spiders first, so a
// spider pushed while the process runs is seen within the source's TTL, without a restart; the
// spiders registered in-process (built-in specs, --spiders DIR, Go spiders) are the fallback
// for names the source does not hold. It is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	spiders  map[string]Spider
	commands map[string]commandEntry
	monitors map[string]Monitors // declared by loaded specs (monitors.go)

	src    Source
	ttl    time.Duration
	cached map[string]*resolved // by name; guarded by mu
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

// Source supplies stored spiders (internal/spiderstore). Resolve returns the newest version of
// name, or an error wrapping ErrUnknownSpider when the source holds none.
type Source interface {
	Resolve(ctx context.Context, name string) (Stored, error)
	Names(ctx context.Context) ([]string, error)
}

// DefaultSourceTTL is how long a name resolved from a Source is used before asking again.
const DefaultSourceTTL = 2 * time.Second

// resolved is one cached answer of the source.
type resolved struct {
	at      time.Time
	missing bool // the source holds no such name
	version string
	sha     string // of the spec, to reuse a compiled spider across versions of equal content
	spider  Spider
	command *commandEntry
}

type commandEntry struct {
	spec     CommandSpec
	settings Settings
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{spiders: map[string]Spider{}, commands: map[string]commandEntry{}, cached: map[string]*resolved{}}
}

// SetSource makes the registry resolve names from src first, asking again after ttl (0:
// DefaultSourceTTL). A source that fails is logged by nobody here: the registry answers from its
// last good answer or its in-process spiders, and the error reaches the caller only when it knows
// the name nowhere.
func (r *Registry) SetSource(src Source, ttl time.Duration) {
	if ttl <= 0 {
		ttl = DefaultSourceTTL
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.src, r.ttl = src, ttl
	clear(r.cached)
}

// HasSource reports whether SetSource was called.
func (r *Registry) HasSource() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.src != nil
}

// resolve returns the source's current answer for name (nil without a source, or when the
// source fails and has never answered for name).
func (r *Registry) resolve(name string) (*resolved, error) {
	r.mu.RLock()
	src, ttl, c := r.src, r.ttl, r.cached[name]
	r.mu.RUnlock()
	if src == nil {
		return nil, nil
	}
	if c != nil && time.Since(c.at) < ttl {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := src.Resolve(ctx, name)
	if errors.Is(err, ErrUnknownSpider) {
		n := &resolved{at: time.Now(), missing: true}
		r.store(name, n)
		return n, nil
	}
	if err != nil {
		if c != nil {
			return c, nil // stale beats nothing while the store is unreachable
		}
		return nil, fmt.Errorf("resolve spider %q: %w", name, err)
	}
	n := &resolved{at: time.Now(), version: st.Version}
	switch {
	case st.Command != nil:
		cmd := *st.Command
		cmd.Command = append([]string(nil), cmd.Command...)
		n.command = &commandEntry{spec: cmd, settings: st.Settings}
	default:
		n.sha = string(st.Spec)
		if c != nil && !c.missing && c.sha == n.sha && (c.spider != nil || c.command != nil) {
			n.spider, n.command = c.spider, c.command
			break
		}
		spec, err := ParseSpec(st.Spec, name+"@"+st.Version)
		if err != nil {
			return nil, fmt.Errorf("resolve spider %q: stored version %s is not usable: %w: %w", name, st.Version, ErrUnknownSpider, err)
		}
		if spec.IsCommand() {
			cs, _ := spec.CommandSpec()
			set, _ := spec.Settings()
			n.command = &commandEntry{spec: cs, settings: set}
		} else if n.spider, err = Compile(spec); err != nil {
			return nil, fmt.Errorf("resolve spider %q: stored version %s is not usable: %w: %w", name, st.Version, ErrUnknownSpider, err)
		}
	}
	r.store(name, n)
	return n, nil
}

func (r *Registry) store(name string, n *resolved) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cached) > 10000 { // a bound, not an LRU: names are few and reload cheaply
		clear(r.cached)
	}
	r.cached[name] = n
}

// Version returns the stored version that name currently resolves to ("" for a spider known
// only in-process).
func (r *Registry) Version(name string) string {
	n, err := r.resolve(name)
	if err != nil || n == nil || n.missing {
		return ""
	}
	return n.version
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

// Lookup returns the in-process spider called name: ErrUnknownSpider if there is none,
// ErrCommandSpider if name is a command spider.
func (r *Registry) Lookup(name string) (Spider, error) {
	n, err := r.resolve(name)
	if n != nil && !n.missing {
		if n.spider != nil {
			return n.spider, nil
		}
		return nil, fmt.Errorf("look up spider %q: %w: run it with the ECS runner", name, ErrCommandSpider)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if s, ok := r.spiders[name]; ok {
		return s, nil
	}
	if _, ok := r.commands[name]; ok {
		return nil, fmt.Errorf("look up spider %q: %w: run it with the ECS runner", name, ErrCommandSpider)
	}
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("look up spider %q: %w", name, ErrUnknownSpider)
}

// Command returns the command spider called name.
func (r *Registry) Command(name string) (CommandSpec, Settings, bool) {
	if n, _ := r.resolve(name); n != nil && !n.missing {
		if n.command == nil {
			return CommandSpec{}, Settings{}, false
		}
		e := *n.command
		e.spec.Command = append([]string(nil), e.spec.Command...)
		return e.spec, e.settings, true
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.commands[name]
	if !ok {
		return CommandSpec{}, Settings{}, false
	}
	e.spec.Command = append([]string(nil), e.spec.Command...)
	return e.spec, e.settings, true
}

// Names returns every name, sorted: the source's (when it answers) and the in-process ones.
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
		if err == nil {
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
