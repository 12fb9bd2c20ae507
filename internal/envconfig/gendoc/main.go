// Command gendoc writes docs/configuration.md from envconfig.Vars (go generate ./internal/envconfig,
// or make docs-config).
package main

import (
	"flag"
	"log"
	"os"

	"crawlq/internal/envconfig"
)

func main() {
	out := flag.String("o", envconfig.DocPath, "file to write")
	flag.Parse()
	if err := os.WriteFile(*out, envconfig.Markdown(), 0o644); err != nil {
		log.Fatalf("gendoc: %v", err)
	}
}
