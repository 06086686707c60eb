# pgbranchproxy: see README.md. `make help` lists the targets.
GO      ?= go
BIN     := bin
PKGS    := ./...
FUZZ_TIME ?= 30s
SOAK_DURATION ?= 10m
SIM_RACE_REPS ?= 200
SIM_KILL_REPS ?= 10
SIM_CATALOG_STOP ?= 30s

.PHONY: help build shim test test-short run bench fuzz lint deps clean image
.PHONY: soak soak-roles sim-smoke sim sim-measure
.PHONY: bench-branchbench
.PHONY: kube-check kube-image

help: ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

build: shim ## build bin/pgbranchproxy and bin/liblazyrw.so
	$(GO) build -o $(BIN)/pgbranchproxy ./cmd/pgbranchproxy
	cp shim/liblazyrw.so $(BIN)/liblazyrw.so

shim: ## build the lazyrw LD_PRELOAD shim
	$(MAKE) -C shim all

deps: ## install what the tests and benchmarks need (Debian packages), if missing
	@./scripts/deps.sh

image: ## build the local PostgreSQL image --runtime docker uses (pgbranchproxy/postgres:15), if missing
	./scripts/image.sh

test: deps build image ## the whole suite: shim C tests, then go test ./... (needs root)
	$(MAKE) -C shim test
	$(GO) test -count=1 -timeout 45m $(PKGS)

test-short: ## unit tests only
	$(GO) test -short -count=1 $(PKGS)

run: deps build ## start serve with a demo source and print the psql line to try
	./scripts/run-demo.sh

bench: deps build ## side-by-side benchmarks (BENCH_QUICK=1 for a short run)
	$(GO) run ./bench

soak: deps build ## long run under mixed load, fails on leaks and lost writes (SOAK_DURATION, default 10m; needs root)
	SOAK_DURATION=$(SOAK_DURATION) $(GO) run ./integration/soak --bin $(BIN)/pgbranchproxy --shim $(BIN)/liblazyrw.so

soak-roles: deps build ## the same through two fronts and two nodes on a Postgres catalog the soak starts (SOAK_DURATION; needs root)
	SOAK_DURATION=$(SOAK_DURATION) $(GO) run ./integration/soak --roles --bin $(BIN)/pgbranchproxy --shim $(BIN)/liblazyrw.so

sim-smoke: deps ## fronts and nodes on network namespaces: race, cancels, front kills, node kill, partition, shared sessions, catalog stop, frozen node (in make test; needs root)
	$(GO) test -count=1 -timeout 10m -v -run '^TestSmoke$$' ./sim

sim: deps ## the same with M3 repeated SIM_RACE_REPS times (200), M6 SIM_KILL_REPS times (10), the catalog stopped SIM_CATALOG_STOP (30s), M11's long cut and M7, then the measurements (sim-measure), for docs/scale-out.md (needs root)
	SIM_RACE_REPS=$(SIM_RACE_REPS) SIM_KILL_REPS=$(SIM_KILL_REPS) SIM_CATALOG_STOP=$(SIM_CATALOG_STOP) SIM_LONG=1 $(GO) test -tags simmeasure -count=1 -timeout 90m -v -run '^(TestSmoke|TestMeasure)$$' ./sim

sim-measure: deps ## make sim's measurements only, on a simulation of their own: footprint (M14), pgbench -S (M2), connect overhead (M1) (needs root)
	SIM_LONG=1 $(GO) test -tags simmeasure -count=1 -timeout 30m -v -run '^TestMeasure$$' ./sim

bench-branchbench: deps build ## BranchBench's five agentic workflows (BRANCHBENCH_QUICK=1 for a short run)
	$(GO) run ./bench/branchbench

kube-check: ## check deploy/kubernetes: typed decoding, flags, privileges, wiring; its containers under Docker (needs root)
	$(GO) test -count=1 ./deploy/kubernetes

kube-image: build image ## build the image deploy/kubernetes runs (KUBE_IMAGE, default pgbranchproxy/pgbranchproxy:dev)
	./deploy/kubernetes/image.sh $(KUBE_IMAGE)

fuzz: ## run every fuzz target for FUZZ_TIME each
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZ_TIME) ./router
	$(GO) test -run '^$$' -fuzz '^FuzzStartup$$' -fuzztime $(FUZZ_TIME) ./proxy
	$(GO) test -run '^$$' -fuzz '^FuzzSCRAM$$' -fuzztime $(FUZZ_TIME) ./proxy
	$(GO) test -run '^$$' -fuzz '^FuzzReceive$$' -fuzztime $(FUZZ_TIME) ./branches/seedcopy

lint: ## gofmt, go vet, staticcheck when installed, actionlint on action.yml and examples/github
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet $(PKGS)
	@if command -v staticcheck >/dev/null; then staticcheck $(PKGS); fi
	./scripts/actionlint.sh

clean: ## remove build output
	rm -rf $(BIN)
	$(MAKE) -C shim clean
