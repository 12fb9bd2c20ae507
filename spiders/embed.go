// Package spiders embeds the spider specs shipped with crawlq (the demo spider first), so every
// binary knows them without a spiders/ directory beside it.
package spiders

import "embed"

// FS holds every *.yaml spec in this directory.
//
//go:embed *.yaml
var FS embed.FS
