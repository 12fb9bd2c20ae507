package spiderstore

// Resolution: spider.Source over the stored specs and projects, the spider a run resolves to.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/spider"
)

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
func listVersions(vs []Version) string {
	var names []string
	if len(vs) > 10 {
		names, vs = append(names, "..."), vs[len(vs)-10:]
	}
	for _, v := range vs {
		names = append(names, v.Version)
	}
	return strings.Join(names, ", ")
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
