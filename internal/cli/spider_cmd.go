package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/spider"
	"crawlq/internal/spiderstore"
	"crawlq/internal/view"
	"crawlq/spiders"
)

// spiderCmd is `crawlq spider push|list|versions|delete`: spiders as versioned data in the stack.
func spiderCmd() *Command {
	return &Command{
		Name: "spider", Synopsis: "push, list and delete the stack's spiders (versioned, in Postgres)",
		Usage: "push FILE|DIR [--version V] | list [--json] | versions NAME | delete NAME [--version V] | test SPEC URL",
		Help: `Spiders live in the database as versioned data: every worker, runner and function resolves a
spider by name when a run needs it, so a pushed spider is used by running workers without a
restart (within 2 seconds). The built-in specs are pushed as version 1 of their names.

  crawlq spider push demo.yaml          validate and store a spec (YAML or JSON) as a new version
  crawlq spider push spiders/           every *.yaml, *.yml, *.json in a directory, all or nothing
  crawlq spider list                    every stored spider, its newest version and version count
  crawlq spider versions NAME           a spider's versions, oldest first: when each was pushed, its hash
  crawlq spider delete NAME             delete every version (--version V: only that one)
  crawlq spider test SPEC URL           fetch one page, show its items, links and errors (no run, no database)

A push of unchanged content adds no version. A bad spec is refused with every mistake by field
path, unknown fields included (with the nearest known field), and nothing is stored. A command spider that no runner would take
(runtime lambda, queue crawl) is refused. Scrapy projects are uploaded as eggs through the
Scrapyd API (addversion.json); their spiders are listed here as PROJECT.SPIDER.`,
		Subcommands: []*Command{
			spiderSub("push", "validate and store a spec file, or a directory of them, as new versions", "FILE|DIR [--version V]", one("FILE or DIR"),
				"version", "name the new version (default the next number; one spec only)",
				func(ctx context.Context, env *Env, st *spiderstore.Store, args []string, version string) error {
					return pushSpiders(ctx, env.Stdout, st, args[0], version)
				}),
			{Name: "list", Synopsis: "every stored spider, its newest version and version count", Usage: "[--json]",
				Help: "Lists the stored spiders: spec spiders and the spiders of every project's newest version.",
				Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
					pg := dbFlag(fs, env)
					asJSON := fs.Bool("json", false, "print JSON")
					return func(ctx context.Context, args []string) error {
						return withSpiderStore(ctx, pg, func(_ *pgxpool.Pool, st *spiderstore.Store) error {
							return listSpiders(ctx, env.Stdout, st, *asJSON)
						})
					}
				}},
			spiderSub("versions", "a spider's versions, oldest first: when each was pushed and the start of its spec's SHA-256", "NAME", one("NAME"), "", "",
				func(ctx context.Context, env *Env, st *spiderstore.Store, args []string, _ string) error {
					vs, err := st.Versions(ctx, args[0])
					if err != nil {
						return err
					}
					if len(vs) == 0 {
						return fmt.Errorf("spider %q: %w", args[0], spiderstore.ErrNotFound)
					}
					tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "VERSION\tPUSHED (UTC)\tSHA256")
					for _, v := range vs {
						fmt.Fprintf(tw, "%s\t%s\t%.12s\n", v.Version, v.PushedAt.UTC().Format(time.DateTime), v.SHA256)
					}
					return tw.Flush()
				}),
			spiderTestCmd(),
			spiderSub("delete", "delete a spider's versions", "NAME [--version V]", one("NAME"),
				"version", "delete only this version (default every version)",
				func(ctx context.Context, env *Env, st *spiderstore.Store, args []string, version string) error {
					n, err := st.Delete(ctx, args[0], version)
					if err != nil {
						return err
					}
					fmt.Fprintf(env.Stdout, "deleted %d version(s) of %s\n", n, args[0])
					return nil
				}),
		},
	}
}

// spiderSub is a spider subcommand that works on the store, with an optional string flag.
func spiderSub(name, synopsis, usage string, args Args, flagName, flagHelp string,
	do func(ctx context.Context, env *Env, st *spiderstore.Store, args []string, flagValue string) error) *Command {
	return &Command{Name: name, Synopsis: synopsis, Usage: usage, Args: args, Help: strings.ToUpper(synopsis[:1]) + synopsis[1:] + ".",
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			value := new(string)
			if flagName != "" {
				value = fs.String(flagName, "", flagHelp)
			}
			return func(ctx context.Context, args []string) error {
				wenv, err := readWakeEnv(env)
				if err != nil {
					return err
				}
				return withSpiderStore(ctx, pg, func(pool *pgxpool.Pool, st *spiderstore.Store) error {
					if err := do(ctx, env, st, args, *value); err != nil {
						return err
					}
					if name == "push" || name == "delete" {
						wakeDispatch(ctx, env, wenv, pool) // crawlq local looks its spiders up again at once
					}
					return nil
				})
			}
		}}
}

// withSpiderStore runs f with the stack's spider store, the built-in specs pushed first (a no-op
// once they are stored).
func withSpiderStore(ctx context.Context, pg *database, f func(*pgxpool.Pool, *spiderstore.Store) error) error {
	return pg.withPool(ctx, func(pool *pgxpool.Pool) error {
		st, err := spiderstore.New(spiderstore.Config{Pool: pool})
		if err != nil {
			return err
		}
		if _, err := st.Seed(ctx, spiders.FS); err != nil {
			return err
		}
		return f(pool, st)
	})
}

func pushSpiders(ctx context.Context, w io.Writer, st *spiderstore.Store, path, version string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	var files []spiderstore.File
	paths := []string{path}
	if fi.IsDir() {
		paths = nil
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			ext := strings.ToLower(filepath.Ext(e.Name()))
			if !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				paths = append(paths, filepath.Join(path, e.Name()))
			}
		}
		if len(paths) == 0 {
			return fmt.Errorf("%s: no *.yaml, *.yml or *.json specs", path)
		}
		if version != "" && len(paths) > 1 {
			return usageErr("--version names one spec's version; push a directory without it")
		}
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, spiderstore.File{Name: p, Data: b})
	}
	pushed, err := st.PushAll(ctx, files, version)
	if err != nil {
		return explainValidation(err)
	}
	for _, p := range pushed {
		if p.Unchanged {
			fmt.Fprintf(w, "%s: unchanged (version %s)\n", p.Name, p.Version)
		} else {
			fmt.Fprintf(w, "%s: pushed version %s (%s)\n", p.Name, p.Version, p.Kind)
		}
	}
	return nil
}

// explainValidation lists every mistake, one per line, by file and field path.
func explainValidation(err error) error {
	var lines []string
	var walk func(error)
	walk = func(e error) {
		var ve *spider.ValidationError
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		if errors.As(e, &ve) {
			for _, fe := range ve.Errors {
				lines = append(lines, fmt.Sprintf("  %s: %s", ve.Source, fe))
			}
			return
		}
		lines = append(lines, "  "+e.Error())
	}
	walk(err)
	if len(lines) == 0 {
		return err
	}
	return fmt.Errorf("nothing pushed; %d problem(s):\n%s", len(lines), strings.Join(lines, "\n"))
}

func listSpiders(ctx context.Context, w io.Writer, st *spiderstore.Store, asJSON bool) error {
	ls, err := st.List(ctx)
	if err != nil {
		return err
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
	if asJSON {
		return writeJSON(w, view.Spiders(ls))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tPROJECT\tVERSION\tVERSIONS")
	for _, l := range ls {
		n := fmt.Sprint(l.Versions)
		if l.Kind == "scrapy" {
			n = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.Name, l.Kind, l.Project, l.Latest, n)
	}
	return tw.Flush()
}
