package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"crawlq/internal/spider"
	"crawlq/internal/spiderstore"
	"crawlq/spiders"
)

// spiderCmd is `crawlq spider push|list|delete`: spiders as versioned data in the stack.
func spiderCmd() *Command {
	return &Command{
		Name: "spider", Synopsis: "push, list and delete the stack's spiders (versioned, in Postgres)",
		Usage: "push FILE|DIR [--version V] | list [--json] | versions NAME | delete NAME [--version V]",
		Help: `Spiders live in the database as versioned data: every worker, runner and function resolves a
spider by name when a run needs it, so a pushed spider is used by running workers without a
restart (within 2 seconds). The built-in specs are pushed as version 1 of their names.

  crawlq spider push demo.yaml          validate and store a spec (YAML or JSON) as a new version
  crawlq spider push spiders/           every *.yaml, *.yml, *.json in a directory, all or nothing
  crawlq spider list                    every stored spider, its newest version and version count
  crawlq spider versions NAME           a spider's versions, oldest first
  crawlq spider delete NAME             delete every version (--version V: only that one)

A push of unchanged content adds no version. A bad spec is refused with every mistake by field
path, unknown fields included, and nothing is stored. A command spider that no runner would take
(runtime lambda, queue crawl) is refused. Scrapy projects are uploaded as eggs through the
Scrapyd API (addversion.json); their spiders are listed here as PROJECT.SPIDER.`,
		Subcommands: true,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			open := dbFlag(fs, env)
			return func(ctx context.Context, args []string) error {
				if len(args) == 0 {
					return usageErr("want a subcommand: push, list, versions or delete")
				}
				sub := flag.NewFlagSet("crawlq spider "+args[0], flag.ContinueOnError)
				sub.SetOutput(env.Stderr)
				version := sub.String("version", "", "version (push: name the new version, default the next number; delete: only this one)")
				asJSON := sub.Bool("json", false, "list: print JSON")
				if err := sub.Parse(args[1:]); err != nil {
					return usageErr("%v", err)
				}
				rest := sub.Args()
				pool, err := open(ctx)
				if err != nil {
					return err
				}
				defer pool.Close()
				st, err := spiderstore.New(spiderstore.Config{Pool: pool})
				if err != nil {
					return err
				}
				// The built-in specs are the first push (a no-op once they are stored).
				if _, err := st.Seed(ctx, spiders.FS); err != nil {
					return err
				}
				switch args[0] {
				case "push":
					if len(rest) != 1 {
						return usageErr("push takes one FILE or DIR")
					}
					return pushSpiders(ctx, env.Stdout, st, rest[0], *version)
				case "list":
					if len(rest) != 0 {
						return usageErr("list takes no arguments")
					}
					return listSpiders(ctx, env.Stdout, st, *asJSON)
				case "versions":
					if len(rest) != 1 {
						return usageErr("versions takes one NAME")
					}
					vs, err := st.Versions(ctx, rest[0])
					if err != nil {
						return err
					}
					if len(vs) == 0 {
						return fmt.Errorf("spider %q: %w", rest[0], spiderstore.ErrNotFound)
					}
					fmt.Fprintln(env.Stdout, strings.Join(vs, "\n"))
					return nil
				case "delete":
					if len(rest) != 1 {
						return usageErr("delete takes one NAME")
					}
					n, err := st.Delete(ctx, rest[0], *version)
					if err != nil {
						return err
					}
					fmt.Fprintf(env.Stdout, "deleted %d version(s) of %s\n", n, rest[0])
					return nil
				}
				return usageErr("unknown subcommand %q: want push, list, versions or delete", args[0])
			}
		},
	}
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
		if ls == nil {
			ls = []spiderstore.Listed{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(ls)
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
