package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// leaf is a command that runs: a command without subcommands, or a subcommand.
type leaf struct {
	path []string // "spider", "push"
	cmd  *Command
}

func leaves() []leaf {
	var out []leaf
	for _, c := range commands() {
		if len(c.Subcommands) == 0 {
			out = append(out, leaf{[]string{c.Name}, c})
		}
		for _, sub := range c.Subcommands {
			out = append(out, leaf{[]string{c.Name, sub.Name}, sub})
		}
	}
	return out
}

// sampleValue is a value flag f accepts.
func sampleValue(f *flag.Flag) string {
	switch f.Name {
	case "arg", "var":
		return "k=v"
	case "state", "states":
		return "dead"
	}
	if f.DefValue != "" {
		return f.DefValue
	}
	return "x"
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Every command (subcommands too) takes each of its flags after its positional arguments, and
// names an unknown flag or an extra argument in its error.
func TestEveryCommandTakesFlagsAfterItsArguments(t *testing.T) {
	for _, l := range leaves() {
		name := strings.Join(l.path, " ")
		if l.cmd.Flags == nil {
			t.Errorf("%s: no Flags", name)
			continue
		}
		// Its positional arguments: as many as it needs, or one if it takes any.
		want := l.cmd.Args.Min
		if want == 0 && l.cmd.Args.Max != 0 {
			want = 1
		}
		var pos []string
		for range want {
			pos = append(pos, "1")
		}
		probe := flag.NewFlagSet(name, flag.ContinueOnError)
		l.cmd.Flags(probe, &Env{Getenv: func(string) string { return "" }})
		n := 0
		probe.VisitAll(func(f *flag.Flag) {
			n++
			args := append(slices.Clone(l.path), pos...)
			if isBool(f) {
				args = append(args, "--"+f.Name)
			} else {
				args = append(args, "--"+f.Name, sampleValue(f))
			}
			var errb bytes.Buffer
			inv, err := parse(commands(), args, &Env{Stdout: io.Discard, Stderr: &errb, Getenv: func(string) string { return "" }})
			if err != nil {
				t.Errorf("%q: %v %s", args, err, errb.String())
				return
			}
			set := false
			inv.fs.Visit(func(g *flag.Flag) { set = set || g.Name == f.Name })
			if !set || !slices.Equal(inv.pos, pos) || inv.name != name {
				t.Errorf("%q: parsed as %s with positionals %q, --%s set %v; want %s, %q, set", args, inv.name, inv.pos, f.Name, set, name, pos)
			}
		})
		if n == 0 && len(pos) == 0 {
			continue
		}

		// An unknown flag after the arguments is named.
		args := append(append(slices.Clone(l.path), pos...), "--no-such-flag")
		var errb bytes.Buffer
		_, err := parse(commands(), args, &Env{Stdout: io.Discard, Stderr: &errb, Getenv: func(string) string { return "" }})
		if !errors.Is(err, errFlags) || !strings.Contains(errb.String(), "no-such-flag") {
			t.Errorf("%q: %v, stderr %q; want a flag error naming -no-such-flag", args, err, errb.String())
		}
		// One argument more than it takes is refused, and named.
		if l.cmd.Args.Max >= 0 {
			args := append(append(slices.Clone(l.path), pos...), "extra-arg")
			if _, err := parse(commands(), args, &Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "extra-arg") {
				t.Errorf("%q: %v; want a usage error naming extra-arg", args, err)
			}
		}
	}
}

// Flags may also stand before a subcommand's name.
func TestFlagsBeforeASubcommand(t *testing.T) {
	for _, args := range [][]string{
		{"spider", "--database-url", "postgres://x", "delete", "shop", "--version", "2"},
		{"spider", "--database-url=postgres://x", "delete", "--version", "2", "shop"},
	} {
		inv, err := parse(commands(), args, &Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }})
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if inv.name != "spider delete" || !slices.Equal(inv.pos, []string{"shop"}) ||
			inv.fs.Lookup("version").Value.String() != "2" || inv.fs.Lookup("database-url").Value.String() != "postgres://x" {
			t.Errorf("%q: parsed as %s %q", args, inv.name, inv.pos)
		}
	}
}

// Each command's usage line, and docs/cli.md's table of commands, name only flags and commands
// that exist (the flags' own help is printed from the flag set, so it cannot drift).
func TestUsageAndDocsNameRealFlags(t *testing.T) {
	flagRe := regexp.MustCompile(`--([a-z][a-z0-9-]*)`)
	flagsOf := map[string]*flag.FlagSet{}
	for _, l := range leaves() {
		name := strings.Join(l.path, " ")
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		l.cmd.Flags(fs, &Env{Getenv: func(string) string { return "" }})
		flagsOf[name] = fs
		for _, m := range flagRe.FindAllStringSubmatch(l.cmd.Usage, -1) {
			if fs.Lookup(m[1]) == nil {
				t.Errorf("crawlq %s: usage %q names --%s, which it does not have", name, l.cmd.Usage, m[1])
			}
		}
	}
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "\n## Commands\n")
	end := strings.Index(readme[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("docs/cli.md has no section \"## Commands\"")
	}
	cell := regexp.MustCompile("`crawlq ([a-z][a-z-]*)((?: [a-z]+)?)([^`]*)`")
	for _, m := range cell.FindAllStringSubmatch(readme[start:start+1+end], -1) {
		name := m[1]
		if _, ok := flagsOf[name+m[2]]; ok {
			name += m[2]
		}
		fs, ok := flagsOf[name]
		if !ok && find(commands(), m[1]) == nil {
			t.Errorf("docs/cli.md names `crawlq %s`, which does not exist", m[1])
			continue
		}
		for _, f := range flagRe.FindAllStringSubmatch(m[3], -1) {
			if fs == nil || fs.Lookup(f[1]) == nil {
				t.Errorf("docs/cli.md: `crawlq %s%s` names --%s, which crawlq %s does not have", m[1], m[2]+m[3], f[1], name)
			}
		}
	}
	section := readme[start : start+1+end]
	for _, c := range commands() {
		if !regexp.MustCompile("`crawlq " + regexp.QuoteMeta(c.Name) + "[ `]").MatchString(section) {
			t.Errorf("docs/cli.md's table of commands does not name crawlq %s", c.Name)
		}
	}
}
