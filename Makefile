# crawlq — run `make help` for the targets.
#
# When DATABASE_URL is unset, targets that need a database start a throwaway PostgreSQL under
# .local/pg (scripts/localpg.sh) and use it; `make clean` removes it.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
# sqlc, pinned in its own module so its dependencies stay out of crawlq's go.mod; the first use
# builds it (a few minutes: it compiles PostgreSQL's parser).
SQLC = $(GO) tool -modfile=tools/go.mod sqlc
# Exports DATABASE_URL for the rest of a recipe line, starting the local server when needed.
WITH_DB = export DATABASE_URL="$${DATABASE_URL:-$$(scripts/localpg.sh start)}";
# Points terraform at the provider mirror installed on this machine.
WITH_TF = export TF_CLI_CONFIG_FILE="$${TF_CLI_CONFIG_FILE:-$$(scripts/tfrc.sh)}";

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z/_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-14s %s\n", $$1, $$2}'

.PHONY: build
build: ## build bin/crawlq
	@test -x bin/crawlq || echo "make build: the first build compiles crawlq and its dependencies (a minute or two)" >&2
	$(GO) build -trimpath -o bin/crawlq ./cmd/crawlq

.PHONY: db
db: ## build bin/crawlq, start the local PostgreSQL (when DATABASE_URL is unset), migrate it and print its URL
	@$(GO) build -trimpath -o bin/crawlq ./cmd/crawlq >&2
	@$(WITH_DB) bin/crawlq migrate >&2 && echo "$$DATABASE_URL"

.PHONY: demo
demo: build ## the main job: crawl the demo site with several workers and show the result
	@scripts/deps.sh demo
	@$(WITH_DB) bin/crawlq demo

.PHONY: test
test: ## verify and run every test (real Postgres, moto, terraform, aws CLI) with -race; the Terraform stack from the start, beside verify and the rest
	@scripts/deps.sh test
	$(WITH_DB) $(WITH_TF) GO=$(GO) VERIFY='$(VERIFY_CMD)' scripts/test.sh

# Through a variable, not $(MAKE) in the recipe: make runs a recipe line that names $(MAKE) even
# under make -n, and make -n test (docs-check's check of the README's make test) would then run
# every test.
VERIFY_CMD = $(MAKE) verify

.PHONY: docs-check
docs-check: ## run every command the docs show (fresh schema, fresh bin/crawlq) and check every relative link
	$(WITH_DB) $(GO) test -count=1 -run 'TestDoc' ./internal/docscheck

.PHONY: bench
bench: build ## queue throughput beside the peers: alternating rounds, medians (docs/performance.md)
	$(WITH_DB) scripts/bench-queue.sh

.PHONY: bench-crawl
bench-crawl: build ## crawl throughput beside Colly: alternating rounds, medians (docs/performance.md)
	$(WITH_DB) scripts/bench-crawl.sh

.PHONY: soak-browser
soak-browser: build ## 2,000 rendered pages through a crawlq worker, Chromium killed mid-page: peak memory, attempts (docs/browser.md)
	$(WITH_DB) scripts/soak-browser.sh

.PHONY: fmt
fmt: ## gofmt and terraform fmt
	gofmt -w $$(git ls-files '*.go')
	terraform fmt -recursive terraform

.PHONY: generate
generate: docs-config ## compile internal/dbsqlc/*.sql into typed Go with sqlc (pinned in tools/go.mod); rewrite docs/configuration.md
	$(SQLC) generate

.PHONY: docs-config
docs-config: ## rewrite docs/configuration.md from internal/envconfig/vars.go (TestDocIsFresh checks it)
	$(GO) generate ./internal/envconfig

# verify is what CI checks before the tests (make test runs it beside the Terraform stack's build).
#
# Each GOOS, and each change of flags, compiles the module and its ~600 dependencies anew, so:
# go vet builds for linux as every crawlq binary the tests build does (CGO_ENABLED=0 -trimpath,
# the runner image's build), which then reuse its packages; and for darwin and windows it vets
# cmd/crawlq (so everything it imports must compile there) and the packages with files of their
# own on that OS, compiled without optimisation or debug information (-N -l -dwarf=false: the
# type checks are what is asked of them, not the code).
CROSS_OS_VET = CGO_ENABLED=0 GOOS=$(1) $(GO) vet -trimpath -gcflags='all=-N -l -dwarf=false' ./cmd/crawlq \
	$$(GOOS=$(1) $(GO) list -f '{{if .IgnoredGoFiles}}{{.ImportPath}}{{end}}' ./...)

.PHONY: verify
verify: ## static checks: gofmt, go vet, go.mod tidy, macOS and Windows build and vet, sqlc-generated code fresh, no wall-clock reads outside internal/clock
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt: these files need formatting:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	CGO_ENABLED=0 $(GO) vet -trimpath ./...
	$(GO) mod tidy -diff
	$(call CROSS_OS_VET,darwin)
	$(call CROSS_OS_VET,windows)
	@$(SQLC) diff || { echo "internal/dbsqlc is stale: run make generate" >&2; exit 1; }
	CGO_ENABLED=0 $(GO) test -trimpath -count=1 -run 'TestOnlyTheClockReadsTheTime|TestWallClockReadsAreFound' ./internal/clock

# What the walkthroughs of the README and docs/ write in the checkout (internal/docscheck runs
# them and checks that clean leaves nothing behind). specs/ goes only if nothing else is in it.
WALKTHROUGH_FILES := shop.yaml books.yaml specs/books.yaml out.json events.jsonl demo-site.log local.log js.yaml

.PHONY: clean
clean: ## stop and remove the local PostgreSQL and emulator, build output, and the files the docs' walkthroughs write
	-scripts/localpg.sh stop
	-[ -x scripts/emulator.sh ] && scripts/emulator.sh stop
	rm -rf .local build bin
	rm -f $(WALKTHROUGH_FILES)
	rmdir specs 2>/dev/null || true

LAMBDAS := api worker dispatch metrics migrate
.PHONY: lambdas
lambdas: ## build each Lambda function as bootstrap in build/<fn>.zip (linux/arm64, provided.al2023)
	@command -v zip >/dev/null || { echo "make lambdas: zip is not installed (apt-get install zip)" >&2; exit 1; }
	@mkdir -p build
	@for fn in $(LAMBDAS); do \
		rm -rf build/$$fn && mkdir -p build/$$fn; \
		GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o build/$$fn/bootstrap ./functions/$$fn; \
		rm -f build/$$fn.zip; (cd build/$$fn && zip -qX ../$$fn.zip bootstrap); \
		echo "build/$$fn.zip"; \
	done

# BASE: an OCI layout directory or image tarball to layer the runner onto (default: scratch).
BASE ?=
.PHONY: image
image: ## build the runner image as an OCI tarball, build/runner-image.tar, without a Docker daemon (BASE=dir|tar: on your image)
	mkdir -p build/linux-amd64
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags='-s -w' -o build/linux-amd64/crawlq ./cmd/crawlq
	$(GO) run ./cmd/crawlq-image -binary build/linux-amd64/crawlq -out build/runner-image.tar $(if $(BASE),-base '$(BASE)')

FUZZTIME ?= 30s
# package:target for every fuzz target (their seed corpora already run in `make test`).
FUZZ_TARGETS := ./internal/api:FuzzDecode ./internal/spider:FuzzParseSpec ./internal/spider:FuzzExtract ./internal/spider:FuzzStreamMatchesDOM \
	./internal/urlx:FuzzCanonical ./internal/robots:FuzzParse ./internal/scrapyd:FuzzRequest

.PHONY: chaos
chaos: ## reliability suite: SIGKILLed workers, Postgres restart, URL state under both, stalling sink, schedule load (<10 min; own throwaway Postgres per scenario)
	@scripts/deps.sh demo
	@mkdir -p build
	CHAOS_SUMMARY=$(CURDIR)/build/chaos-summary.txt $(GO) test -tags chaos -count=1 -v -timeout 10m ./chaos
	@cat build/chaos-summary.txt

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME (default 30s)
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; echo "== $$fn ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	done
