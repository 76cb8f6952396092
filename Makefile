# payhook — run `make help` for the list of targets.
SHELL := /usr/bin/env bash
export PATH := /usr/local/go/bin:$(PATH)

FUZZ ?=
FUZZPKG ?= ./...
FUZZTIME ?= 30s

.DEFAULT_GOAL := help

.PHONY: help test race vet fmt lint build run bench bench-go fuzz faults dst dst-bugs pg-start pg-stop demo

help: ## show this help
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}'

test: ## run all tests (race detector, throwaway PostgreSQL) via scripts/test.sh
	scripts/test.sh

race: ## same as test (tests always run with -race)
	scripts/test.sh

vet: ## go vet ./...
	go vet ./...

fmt: ## format all Go files (gofmt -w)
	gofmt -w .

lint: vet ## go vet + gofmt check (fails listing unformatted files)
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

build: ## build bin/payhook
	go build -o bin/payhook ./cmd/payhook

run: ## run the server (go run ./cmd/payhook serve)
	go run ./cmd/payhook serve

bench: ## payhook, SQLite, PostgreSQL (durable) and stripe-sync-engine side by side; rewrites docs/benchmarks.md (sizes: see bench/run.sh)
	bench/run.sh

bench-go: ## the go test benchmarks (no tests) with a throwaway PostgreSQL
	PAYHOOK_RACE=0 scripts/test.sh -run '^$$' -bench . -benchtime 2s ./...

fuzz: ## every Fuzz target for FUZZTIME (30s) each; one: make fuzz FUZZ=FuzzVerify [FUZZPKG=./provider/stripe]
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh '$(FUZZ)' '$(FUZZPKG)'

faults: ## the long fault suite (kills, PostgreSQL down, disk full, two instances); figures in faults-report.md
	rm -f faults-report.md
	PAYHOOK_FAULTS=long PAYHOOK_FAULTS_REPORT=$(CURDIR)/faults-report.md \
		scripts/test.sh -run 'TestFault|TestSimStormAgainstServe' -v ./cmd/payhook/
	@cat faults-report.md

SEEDS ?= 1000
PG_SEEDS ?= 100
dst: ## the deterministic simulation, no race detector: SEEDS (1000) on SQLite, PG_SEEDS (100) on both engines; replay one: go test ./internal/dst -run 'TestDST$$' -seed S -v
	PAYHOOK_RACE=0 scripts/test.sh -timeout 0 ./internal/dst -run '^(TestDST|TestDSTPostgres)$$' -seeds $(SEEDS) -pg-seeds $(PG_SEEDS)

dst-bugs: ## the bugs put back on purpose, one at a time, each found by the simulation within its stated seeds (-tags dst)
	go test -count=1 -timeout 0 -tags dst ./internal/dst -run TestDSTFindsPutBackBugs -v

pg-start: ## start a throwaway PostgreSQL cluster (prints the DSN; fsync=off, so serve on it needs --unsafe-durability)
	scripts/pg.sh start

pg-stop: ## stop it and delete its files
	scripts/pg.sh stop

demo: ## payhook on SQLite against the simulator's storm scenario, with a summary
	go run ./cmd/payhook demo
