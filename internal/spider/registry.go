package spider

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Registry maps names to spiders: in-process ones (declarative and Go) and command ones.
// It is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	spiders  map[string]Spider
	commands map[string]commandEntry
	monitors map[string]Monitors // declared by loaded specs (monitors.go)
}

type commandEntry struct {
	spec     CommandSpec
	settings Settings
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{spiders: map[string]Spider{}, commands: map[string]commandEntry{}}
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
	r.mu.RLock()
	defer r.mu.RUnlock()
	if s, ok := r.spiders[name]; ok {
		return s, nil
	}
	if _, ok := r.commands[name]; ok {
		return nil, fmt.Errorf("look up spider %q: %w: run it with the ECS runner", name, ErrCommandSpider)
	}
	return nil, fmt.Errorf("look up spider %q: %w", name, ErrUnknownSpider)
}

// Command returns the command spider called name.
func (r *Registry) Command(name string) (CommandSpec, Settings, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.commands[name]
	if !ok {
		return CommandSpec{}, Settings{}, false
	}
	e.spec.Command = append([]string(nil), e.spec.Command...)
	return e.spec, e.settings, true
}

// Names returns every registered name, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.spiders)+len(r.commands))
	for n := range r.spiders {
		names = append(names, n)
	}
	for n := range r.commands {
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
