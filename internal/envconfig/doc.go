package envconfig

import (
	"bytes"
	"fmt"
	"strings"
)

// DocPath is where Markdown's output lives, from the module root.
const DocPath = "docs/configuration.md"

// Markdown renders docs/configuration.md from Vars: a table per group of every variable's name,
// default, the processes that read it, and meaning.
func Markdown() []byte {
	var b bytes.Buffer
	b.WriteString(`<!-- Generated from internal/envconfig/vars.go by "make docs-config" (go generate ./internal/envconfig); do not edit. -->
# Configuration

Every environment variable crawlq reads, with its default and the processes that read it. Each
process reads its environment once, at start, into one validated configuration: a bad value stops
it with an error that names the variable (for example ` + "`CRAWLQ_MAINTAIN_INTERVAL: not a positive duration such as 24h: \"soon\"`" + `).
The Terraform stack sets them on the functions and the runner task; locally, set what you need in
the shell.

Processes: **api**, **worker**, **dispatch**, **metrics** and **migrate** are the Lambda
functions; **runner** is ` + "`crawlq runner`" + ` (the ECS task); **crawlq** is the other commands
(` + "`crawlq local`" + ` runs the four functions' handlers in one process and reads what they read).
Each function reads and checks only what it uses (the "Read by" column), so a bad value meant for
one function does not stop another.
`)
	var groups []string
	seen := map[string]bool{}
	for _, v := range Vars {
		if !seen[v.Group] {
			seen[v.Group] = true
			groups = append(groups, v.Group)
		}
	}
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, g := range groups {
		fmt.Fprintf(&b, "\n## %s\n\n| Variable | Default | Read by | Meaning |\n|---|---|---|---|\n", g)
		for _, v := range Vars {
			if v.Group != g {
				continue
			}
			def := "—"
			if v.Default != "" {
				def = cell(v.Default)
			}
			var read []string
			for _, p := range Processes {
				for _, q := range v.Read {
					if p == q {
						read = append(read, string(p))
						break
					}
				}
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Name, def, strings.Join(read, ", "), cell(v.Meaning))
		}
	}
	return b.Bytes()
}
