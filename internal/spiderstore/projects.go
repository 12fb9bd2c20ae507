package spiderstore

// Scrapy projects: uploaded versions with their eggs, and the names of their spiders.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/dbsqlc"
)

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
