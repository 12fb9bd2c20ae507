package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"crawlq/internal/spider"
	"crawlq/internal/spiderstore"
)

// spiderName maps a Scrapyd (project, spider) pair to the crawlq spider name: a spec spider's own
// name in the project "default" (or none), "<project>.<spider>" for a spider of an uploaded
// project. version, when given, must exist (and hold the spider): a run scheduled with it runs
// that version.
func (a *API) spiderName(ctx context.Context, project, name, version string) (string, error) {
	if project == "" || project == spiderstore.DefaultProject {
		if err := a.knownSpider(name); err != nil {
			return "", err
		}
		if version != "" {
			_, err := a.cfg.Spiders.Resolve(name, version)
			if errors.Is(err, spider.ErrUnknownVersion) || errors.Is(err, spider.ErrUnknownSpider) {
				return "", userErrf("%v", err)
			}
			if err != nil {
				return "", err
			}
		}
		return name, nil
	}
	if err := spiderstore.CheckProject(project); err != nil {
		return "", badf("%s", strings.TrimPrefix(err.Error(), "invalid: "))
	}
	pv, err := a.cfg.Store.GetProjectVersion(ctx, project, version)
	if errors.Is(err, spiderstore.ErrNotFound) {
		if version == "" {
			return "", userErrf("unknown project %q", clip(project))
		}
		return "", userErrf("unknown version %q of project %q", clip(version), clip(project))
	}
	if err != nil {
		return "", err
	}
	if !slices.Contains(pv.Spiders, name) {
		return "", userErrf("spider %q not found in project %s version %s (its spiders: %v)", clip(name), project, pv.Version, pv.Spiders)
	}
	return spiderstore.SpiderName(project, name), nil
}

// runnable refuses to schedule a command spider no runner would take (queued to the Lambda
// workers it would stay pending forever).
func runnable(res spider.Resolved) error {
	if res.Command == nil {
		return nil
	}
	// Only the runtime decides: a command spider of runtime ecs (its spec's default) goes to the
	// runners' queue even when its settings name the default queue (see internal/crawl, runQueue), and a spec
	// that names queue crawl is refused at push.
	if res.Settings.Runtime == spider.RuntimeLambda {
		return badf("spider %s is a command spider declared for the Lambda workers (runtime lambda), which cannot run a process; "+
			"fix its spec (runtime: ecs, no queue) and push it again", clip(res.Name))
	}
	return nil
}

func (a *API) listSpiders(ctx context.Context, r *Request) (Response, error) {
	if r.Project != "" && r.Project != spiderstore.DefaultProject {
		pv, err := a.cfg.Store.GetProjectVersion(ctx, r.Project, r.Version)
		if errors.Is(err, spiderstore.ErrNotFound) {
			if r.Version != "" {
				return nil, userErrf("unknown version %q of project %q", clip(r.Version), clip(r.Project))
			}
			return nil, userErrf("unknown project %q", clip(r.Project))
		}
		if err != nil {
			return nil, err
		}
		return Response{"spiders": pv.Spiders, "version": pv.Version}, nil
	}
	names := []string{}
	for _, n := range a.cfg.Spiders.Names() {
		if _, _, ok := spiderstore.SplitName(n); !ok {
			names = append(names, n)
		}
	}
	return Response{"spiders": names}, nil
}

func (a *API) listProjects(ctx context.Context) (Response, error) {
	ps, err := a.cfg.Store.Projects(ctx)
	if err != nil {
		return nil, err
	}
	return Response{"projects": append([]string{spiderstore.DefaultProject}, ps...)}, nil
}

func (a *API) listVersions(ctx context.Context, r *Request) (Response, error) {
	if r.Project == spiderstore.DefaultProject {
		return Response{"versions": []string{}}, nil
	}
	vs, err := a.cfg.Store.ProjectVersions(ctx, r.Project)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, userErrf("unknown project %q", clip(r.Project))
	}
	return Response{"versions": vs}, nil
}

func (a *API) addVersion(ctx context.Context, r *Request) (Response, error) {
	if r.Project == spiderstore.DefaultProject {
		return nil, badf("project %q holds the pushed spider specs; upload eggs under a project of their own", spiderstore.DefaultProject)
	}
	spiders, err := a.cfg.Store.AddVersion(ctx, r.Project, r.Version, r.Egg)
	a.spidersChanged(err)
	if errors.Is(err, spiderstore.ErrInvalid) {
		return nil, badf("%s", strings.TrimPrefix(err.Error(), "invalid: "))
	}
	if err != nil {
		return nil, err
	}
	return Response{"project": r.Project, "version": r.Version, "spiders": len(spiders), "spider_names": spiders}, nil
}

func (a *API) delProject(ctx context.Context, r *Request) (Response, error) {
	if r.Project == spiderstore.DefaultProject {
		return nil, badf("project %q holds the pushed spider specs; delete those with delspider", spiderstore.DefaultProject)
	}
	version := ""
	if r.Action == ActDelVersion {
		version = r.Version
	}
	err := a.cfg.Store.DeleteProject(ctx, r.Project, version)
	a.spidersChanged(err)
	if errors.Is(err, spiderstore.ErrNotFound) {
		return nil, userErrf("%v", err)
	}
	if err != nil {
		return nil, err
	}
	return Response{}, nil
}

// spidersChanged makes the registry forget what it cached from the store after a push or
// delete that succeeded, so this process's next schedule uses it at once rather than within the
// registry's TTL (under crawlq local the workers share the registry too).
func (a *API) spidersChanged(err error) {
	if err == nil {
		a.cfg.Spiders.Forget()
	}
}

func (a *API) pushSpider(ctx context.Context, r *Request) (Response, error) {
	p, err := a.cfg.Store.Push(ctx, spiderstore.File{Name: "spec", Data: []byte(r.Spec)}, r.Version)
	a.spidersChanged(err)
	switch {
	case errors.Is(err, spiderstore.ErrInvalid):
		return nil, badf("%s", strings.TrimPrefix(err.Error(), "invalid: "))
	case errors.Is(err, spiderstore.ErrExists):
		return nil, userErrf("%v", err)
	case err != nil:
		return nil, err
	}
	return Response{"spider": p.Name, "version": p.Version, "kind": p.Kind, "unchanged": p.Unchanged}, nil
}

func (a *API) delSpider(ctx context.Context, r *Request) (Response, error) {
	n, err := a.cfg.Store.Delete(ctx, r.Spider, r.Version)
	a.spidersChanged(err)
	if errors.Is(err, spiderstore.ErrNotFound) || errors.Is(err, spiderstore.ErrInUse) {
		return nil, userErrf("%v", err)
	}
	if err != nil {
		return nil, fmt.Errorf("delete spider: %w", err)
	}
	return Response{"deleted_versions": n}, nil
}
