# morph: `make demo` runs the offline demo, `make test` runs every check CI runs.
GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Test fixtures: hand-written WAT guests, one per fault the host must survive.
WAT     := $(wildcard guests/testdata/*.wat)
# and standard Go guests (guests/testdata/<name>/, a module each), for what
# is easiest to reach through Go's own APIs: files, environment, HTTP.
GO_FIXTURES := guests/testdata/cap_go.wasm
FIXTURES := $(WAT:.wat=.wasm) $(GO_FIXTURES)

# Nested modules (own go.mod, kept at an old go line for guest toolchains):
# the root's ./... does not reach them, so vet and unit visit each.
MODULES := abi guests/go/pdk examples/go-hooks examples/pipelines/verify temporal
# The pipeline examples' WebAssembly stage handler (examples/pipelines).
PIPELINE_EXAMPLES := examples/pipelines/verify/verify.wasm
EXAMPLES := examples/go-hooks/go-hooks.wasm $(PIPELINE_EXAMPLES)

# TinyGo guests: TinyGo 0.34 built from source once into a cache by
# scripts/tinygo.sh (about 1.5 min cold, 0.1 s warm). MORPH_SKIP_TINYGO=1
# builds none, and the host tests skip theirs.
TINYGO_EXAMPLES := $(if $(filter 1,$(MORPH_SKIP_TINYGO)),,examples/go-hooks/go-hooks-tinygo.wasm)

# Rust guests: Debian's rustc 1.63 with its wasm32 std and packaged serde,
# offline (no crates.io); rustup's rustc, first on PATH, has no wasm32 std.
CARGO        := RUSTC=/usr/bin/rustc /usr/bin/cargo
# One cargo target directory for every Rust build here, and, through the
# environment, for the scaffold TestPluginNew builds: serde and the PDK
# compile once per profile, not once per crate. An absolute path (each crate
# builds from its own directory); set it to keep the builds elsewhere.
export CARGO_TARGET_DIR ?= $(CURDIR)/target
# The example's module where cargo alone would put it, which its morph.toml
# and the tests read: copied from the shared directory.
RUST_EXAMPLE := examples/rust-hooks/target/wasm32-unknown-unknown/release/rust_hooks.wasm
# examples/rust-hooks' .cargo/config.toml builds for wasm32; its tests run on the host's target.
RUST_HOST     = $(shell /usr/bin/rustc -vV 2>/dev/null | sed -n 's/^host: //p')

# mock-llm (@dwmkerr/mock-llm on npm), an OpenAI-compatible mock server the
# model-client tests start on 127.0.0.1 (internal/mockllm): installed once
# into the cache, a directory per version; unit tells the tests where.
MOCK_LLM_VERSION := 0.1.29
MOCK_LLM_DIR     := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/morph/mock-llm-$(MOCK_LLM_VERSION)
MOCK_LLM         := $(MOCK_LLM_DIR)/node_modules/.bin/mock-llm

.PHONY: all go-version abi-pin build test fmt-check vet unit unit-root unit-modules guests demo demo-temporal chaos clean fixtures examples tools-wabt tools-mock-llm tools-mcp tools-temporal tools-oci dot-corpus tinygo tinygo-examples rust rust-test tools-rust fuzz fuzz-wasm fuzz-short extism-guests bench generate tools-jaeger

all: build

# go-version: the Go that morph needs is go.mod's go line (README says the same; internal/doccheck checks it).
# Asked outside the module, so that GOTOOLCHAIN=auto does not switch first: an older Go is refused here with
# what to do, not later with a toolchain download that fails offline.
go-version:
	@need=$$(sed -n 's/^go \([0-9][0-9.]*\).*/\1/p' go.mod); \
	have=$$(cd / && GOTOOLCHAIN=local $(GO) env GOVERSION | sed 's/^go//'); \
	if [ "$$(printf '%s\n%s\n' "$$need" "$$have" | sort -V | head -n1)" != "$$need" ]; then \
		echo "morph needs Go $$need or newer (go.mod's go line); $(GO) is $$have: install Go $$need from https://go.dev/dl/, or set GOTOOLCHAIN=auto with network access and Go fetches it" >&2; \
		[ "$$($(GO) env GOTOOLCHAIN)" != local ] || exit 1; \
	fi

# abi-pin: after a commit that changes abi/, pin every module's requirement on abi to that commit, so that
# `go get github.com/morphhost/morph@...` resolves abi from the repository (scripts/abi-pin.sh).
abi-pin:
	@scripts/abi-pin.sh --write

# morph-render draws pipelines for "morph pipeline render", which finds it
# beside morph: it alone links Graphviz (see cmd/morph-render).
# morph-temporal runs durable turns for "morph worker" and "morph run
# --temporal": it alone links the Temporal SDK, in the temporal module.
build: go-version
	$(GO) build -o $(BIN)/ -ldflags '$(LDFLAGS)' ./cmd/morph ./cmd/morph-render
	cd temporal && $(GO) build -o ../$(BIN)/ ./cmd/morph-temporal

# test is what .ci/run runs: formatting, vet, and the race-enabled tests.
# The tools apt installs first, one after the other (apt holds a lock);
# then three stages, each of jobs that leave a core of CI's two idle when
# run alone: the guests (the Rust example's single-threaded LTO link beside
# the rest); the root's tests beside the nested modules' (the Temporal tests
# mostly wait on the dev server) and the Rust PDK's; then the fuzzing, whose
# two sequences keep both cores busy. -Otarget keeps each job's output whole.
test: go-version fmt-check vet tools-wabt tools-rust
	@$(MAKE) --no-print-directory -j2 -Otarget guests tools-mock-llm tools-mcp tools-temporal tools-oci dot-corpus tools-jaeger
	@$(MAKE) --no-print-directory -j3 -Otarget unit rust-test
	@$(MAKE) --no-print-directory fuzz

# Every module the tests load, built.
guests: fixtures examples extism-guests tinygo-examples rust

# generate writes the PDKs' per-hook code from abi's hook table
# (abi/internal/gen: the Go PDK's exports and hook functions, the Rust
# PDK's hook list, macro arms and typed hooks); abi's tests fail when a
# committed file differs from what it writes.
generate:
	cd abi && $(GO) generate ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	@for m in $(MODULES); do echo "go vet ($$m)"; (cd $$m && $(GO) vet ./...) || exit 1; done
	@echo "wasip1 build of abi and the Go PDK"
	cd abi && GOOS=wasip1 GOARCH=wasm $(GO) build ./...
	cd guests/go/pdk && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...
	cd guests/extism && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...

# -race, except in wazero's optimizing compiler (its frontend, ssa and
# backend packages), which it made eight times slower: 15-25 s to compile
# a standard Go guest instead of 2-3. The compiler runs on the goroutine
# that calls CompileModule (morph asks for no compilation workers), on data
# no other goroutine sees, so there was no race for the detector to find;
# every other package, wazero's runtime included, stays instrumented.
WAZEVO := github.com/tetratelabs/wazero/internal/engine/wazevo
RACE   := -race $(foreach p,frontend ssa backend/...,-gcflags=$(WAZEVO)/$(p)=-race=false)

# The root's packages share one compilation cache, new for each run
# (internal/testenv.CompileCache): a standard Go guest compiles once per run,
# not once per package that loads it. wazero names its version in the
# cache's entries, read from the binary's build information, which a library
# package's test binary lacks ("dev") and cmd/morph's has (go.mod's): the
# linker sets go.mod's in every one, so that cmd/morph's tests and the
# library packages' share their compilations of go-hooks.wasm and
# verify.wasm (15 s each under -race on a loaded machine, 2 s from the cache).
WAZERO_VERSION = $(shell $(GO) list -m -f '{{.Version}}' github.com/tetratelabs/wazero)
WAZERO_LDFLAGS = -ldflags=-X=github.com/tetratelabs/wazero/internal/version.version=$(WAZERO_VERSION)
# unit runs the two at once (make -j2 unit): the root's tests and the
# nested modules'.
unit: unit-root unit-modules

unit-root:
	@cache=$$(mktemp -d) && trap 'rm -rf "$$cache"' EXIT && \
	echo "MORPH_TEST_CACHE=$$cache MORPH_MOCK_LLM=$(MOCK_LLM) MORPH_MCP_TOOLS=$(MCP_TOOLS) MORPH_OCI_TOOLS=$(OCI_TOOLS) MORPH_DOT_CORPUS=$(DOT_CORPUS) MORPH_JAEGER=$(JAEGER) $(GO) test $(RACE) $(WAZERO_LDFLAGS) -count=1 ./..." && \
	MORPH_TEST_CACHE=$$cache MORPH_MOCK_LLM=$(MOCK_LLM) MORPH_MCP_TOOLS=$(MCP_TOOLS) MORPH_OCI_TOOLS=$(OCI_TOOLS) MORPH_DOT_CORPUS=$(DOT_CORPUS) MORPH_JAEGER=$(JAEGER) $(GO) test $(RACE) $(WAZERO_LDFLAGS) -count=1 ./...

unit-modules:
	@for m in $(MODULES); do (cd $$m && MORPH_TEMPORAL=$(TEMPORAL_CLI) $(GO) test $(RACE) -count=1 ./...) || exit 1; done

demo: build examples
	@echo "== 1/3: the go-hooks plugin builds the prompt (see its House style section) and the parameters =="
	./$(BIN)/morph run --config morph.toml --show-prompt "What is 17.5% of 2,340 plus the square root of 1,764?"
	@echo "== 2/3: a run that cannot conclude ends with the plugin's fallback final and its tool-success count (exit 3) =="
	./$(BIN)/morph run --config demo/fallback.toml "Count the words of the pangram and relate them to its letters." || test $$? -eq 3  # exit 3: the fallback final
	@echo "== 3/3: a pipeline: plan, implement, and a hybrid diamond whose agent fails the first check (OUTCOME:FAIL) and passes the second =="
	./$(BIN)/morph pipeline run --config examples/pipelines/plan-implement-verify.toml examples/pipelines/plan-implement-verify.dot
	@echo "(the run directory is under runs/: its checkpoint, each stage's prompt.md and response.md; 'bin/morph pipeline render runs/<dir> -o run.svg' draws it)"

# The demo's first job on Temporal: a dev server, two workers and
# `morph run --temporal` (scripts/demo-temporal.sh; the CLI builds once).
demo-temporal: build examples
	@scripts/demo-temporal.sh

# chaos tests durable turns under faults, as an operator would
# (temporal/cmd/morph-chaos): a dev server with a database file, two
# workers, a model server that logs every call, the ledger tool; the
# sessions' turns undisturbed, then under worker kills (SIGKILL every
# ~CHAOS_KILL_EVERY) and dev server kills; a report of the finals, the
# repeated calls and ledger lines, turn and recovery times. Each phase is
# bounded by CHAOS_DURATION. Not part of test: it takes minutes.
CHAOS_SESSIONS ?= 50
CHAOS_DURATION ?= 10m
CHAOS_KILL_EVERY ?= 6s
CHAOS_SERVER_KILLS ?= 2
CHAOS_FLAGS ?=
chaos: build guests/testdata/ledger.wasm tools-temporal
	cd temporal && $(GO) run ./cmd/morph-chaos -morph ../$(BIN)/morph -ledger ../guests/testdata/ledger.wasm \
		-temporal-cli "$(TEMPORAL_CLI)" -sessions $(CHAOS_SESSIONS) -duration $(CHAOS_DURATION) \
		-kill-every $(CHAOS_KILL_EVERY) -server-kills $(CHAOS_SERVER_KILLS) $(CHAOS_FLAGS)

fixtures: $(FIXTURES)

examples: $(EXAMPLES)

# A standard Go guest: wasip1 reactor (-buildmode=c-shared), exports via //go:wasmexport.
examples/go-hooks/go-hooks.wasm: $(wildcard examples/go-hooks/*.go guests/go/pdk/*.go abi/*.go) examples/go-hooks/go.mod guests/go/pdk/go.mod
	cd examples/go-hooks && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags='-s -w' -o go-hooks.wasm .

# Pipeline stage handlers (abi/SPEC.md section 11): standard Go wasip1
# reactors, like go-hooks.wasm, run by pipeline nodes of type wasm:<plugin>.
examples/pipelines/verify/verify.wasm: $(wildcard examples/pipelines/verify/*.go guests/go/pdk/*.go abi/*.go) examples/pipelines/verify/go.mod guests/go/pdk/go.mod
	cd examples/pipelines/verify && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags='-s -w' -o verify.wasm .

guests/testdata/%.wasm: guests/testdata/%.wat | tools-wabt
	wat2wasm $< -o $@

guests/testdata/cap_go.wasm: $(wildcard guests/testdata/cap_go/*.go guests/go/pdk/*.go abi/*.go) guests/testdata/cap_go/go.mod guests/go/pdk/go.mod
	cd guests/testdata/cap_go && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags='-s -w' -o ../cap_go.wasm .

# make chaos's tool: appends a line to the ledger file it is granted.
guests/testdata/ledger.wasm: $(wildcard guests/testdata/ledger/*.go guests/go/pdk/*.go abi/*.go) guests/testdata/ledger/go.mod guests/go/pdk/go.mod
	cd guests/testdata/ledger && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags='-s -w' -o ../ledger.wasm .

# Each fuzz target for a bounded number of executions (a few seconds each
# here); a crasher lands in the package's testdata/fuzz/ and, committed,
# stays as a regression seed that go test runs. A count, not a duration: a
# duration-based -fuzztime can end in a spurious "context deadline exceeded"
# in Go 1.26 (go.dev/issue/75804, fixed in 1.27).
FUZZTIME ?= 20000x
# FuzzHostileModule builds, loads and runs a module each time (about 100 a
# second, some loads take half a second): fewer executions.
FUZZHOSTILE ?= 1000x
# FuzzJournalRecord encodes a whole record with every field twice (by hand
# and with encoding/json) and decodes both: 20000x took 21 s in CI, 3000x 12 s
# (new inputs minimised), 1000x about 3 s.
FUZZJOURNAL ?= 1000x
# go test -fuzz takes one target and keeps about one core and a half busy,
# so the targets run as two sequences side by side (15-20 s sooner on two
# cores): the four whose executions run wasm (host's two, 10-30 s each, and
# the Extism loader's two, which even the sequences out: ~45 s each in CI),
# and the seven short ones. FuzzHostileModule, which times its loads and
# calls, runs last, when the short sequence has about ended.
#
# The fuzzing engine's cache of the inputs it found interesting is the
# run's own (FUZZCACHE), not go's cache directory: there it grew with every
# run and each run executed it all first (FuzzHostileModule: 365 inputs, 20
# to 30 s, after some weeks here), so a run cost more on an older machine
# and checked something else on each. Now every run checks the committed
# seeds (testdata/fuzz) and the same number of new inputs, everywhere.
fuzz: fixtures
	@cache=$$(mktemp -d) && trap 'rm -rf "$$cache"' EXIT && \
	$(MAKE) --no-print-directory -j2 -Otarget FUZZCACHE=$$cache fuzz-wasm fuzz-short

# fuzzrun TARGET,PACKAGE,COUNT[,FLAGS] fuzzes one target, its cache under
# FUZZCACHE when set (a directory per package: targets of two packages may
# share a name and not their input types).
fuzzrun = $(GO) test -run '^$$' -fuzz '^$(1)$$' -fuzztime $(3) $(4) ./$(2)$(if $(FUZZCACHE), -args -test.fuzzcachedir=$(FUZZCACHE)/$(2))

fuzz-wasm:
	$(call fuzzrun,FuzzDecodeOutput,host,$(FUZZTIME))
	$(call fuzzrun,FuzzExtismBinary,host/internal/extism,$(FUZZTIME))
	$(call fuzzrun,FuzzKernel,host/internal/extism,$(FUZZTIME))
	$(call fuzzrun,FuzzJournalRecord,pipeline,$(FUZZJOURNAL))
	$(call fuzzrun,FuzzHostileModule,host,$(FUZZHOSTILE),-fuzzminimizetime 20x)

# host's FuzzLoad comes last: fuzz-wasm builds host's fuzzing test binary
# first, and two go commands building it at once would each do all of it.
fuzz-short:
	$(call fuzzrun,FuzzInstrument,host/internal/interrupt,$(FUZZTIME))
	$(call fuzzrun,FuzzLoad,config,$(FUZZTIME))
	$(call fuzzrun,FuzzSampleParams,host/conform,$(FUZZTIME))
	$(call fuzzrun,FuzzParseDOT,pipeline,$(FUZZTIME))
	$(call fuzzrun,FuzzParseCondition,pipeline,$(FUZZTIME))
	$(call fuzzrun,FuzzParseStylesheet,pipeline,$(FUZZTIME))
	$(call fuzzrun,FuzzLoad,host,$(FUZZTIME))

# Extism test plugins (guests/extism, written with github.com/extism/go-pdk):
# standard Go wasip1 reactors, one per directory, for host/extism_test.go.
EXTISM_GUESTS := $(foreach g,hooks tools probe mcpv2 conformance,guests/extism/extism-$(g).wasm)

extism-guests: $(EXTISM_GUESTS)

guests/extism/extism-%.wasm: guests/extism/%/main.go $(wildcard guests/extism/internal/*/*.go abi/*.go) guests/extism/go.mod guests/extism/go.sum
	cd guests/extism && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags='-s -w' -o extism-$*.wasm ./$*

tinygo:
	@scripts/tinygo.sh >/dev/null

# The Temporal CLI and its dev server, which the temporal module's tests
# start: built once from the Go module proxy into the cache (about 4 minutes
# cold, then nothing).
tools-temporal:
	@scripts/temporal.sh >/dev/null

# The CLI's path once built (expanded when a recipe uses it, after
# tools-temporal): the temporal module's tests fail, not skip, without it.
TEMPORAL_CLI = $(shell scripts/temporal.sh --print-path 2>/dev/null)

# Jaeger all-in-one v1.76.0, which cmd/morph's end-to-end trace test
# (jaeger_test.go) sends a run's spans to and reads them back from: built
# once from the Go module proxy into the cache (6.3 minutes of CPU cold, see
# BENCHMARKS.md "Jaeger"; then nothing). JAEGER is its path once built.
tools-jaeger:
	@scripts/jaeger.sh >/dev/null
JAEGER = $(shell scripts/jaeger.sh --print-path 2>/dev/null)

# The MCP ecosystem's own software for the MCP tests (Node 22, the
# TypeScript SDK, the conformance suite, the Inspector CLI, the reference
# servers), pinned by scripts/mcp-tools/package-lock.json: installed once
# into the cache (about 30 s cold, then nothing).
tools-mcp:
	@scripts/mcp-tools.sh >/dev/null

# Its directory once installed (expanded when a recipe uses it, after
# tools-mcp): the MCP tests fail, not skip, when it is set and missing.
MCP_TOOLS = $(shell scripts/mcp-tools.sh --print-path 2>/dev/null)

# crane (the tests' registry), oras and cosign for package oci's tests,
# pinned in scripts/oci-tools.sh: built once from the Go module proxy into
# the cache. Cold, about 7 minutes on 2 cores (cosign is nearly all of it:
# 383 s measured) and 2 GB of module cache; then nothing.
tools-oci:
	@scripts/oci-tools.sh >/dev/null

# Its directory once built (expanded when a recipe uses it, after
# tools-oci): the OCI tests fail, not skip, when it is set and missing.
OCI_TOOLS = $(shell scripts/oci-tools.sh --print-path 2>/dev/null)

# The published pipelines pipeline/published_test.go runs: three projects'
# Go modules, pinned in scripts/dot-corpus.sh, downloaded once into the
# module cache (a few hundred KB; then no network).
dot-corpus:
	@scripts/dot-corpus.sh >/dev/null

# Their directories once downloaded, colon-separated (expanded when a recipe
# uses it, after dot-corpus): the test fails, not skips, when it is set and
# one is missing.
DOT_CORPUS = $(shell scripts/dot-corpus.sh --print-path 2>/dev/null)

tinygo-examples: $(TINYGO_EXAMPLES)

# The same sources as go-hooks.wasm; -scheduler=none: no asyncify, so memory
# stays flat across calls (see host/tinygo_test.go).
examples/go-hooks/go-hooks-tinygo.wasm: $(wildcard examples/go-hooks/*.go guests/go/pdk/*.go abi/*.go) examples/go-hooks/go.mod guests/go/pdk/go.mod scripts/tinygo.sh
	TINYGO=$$(scripts/tinygo.sh) && cd examples/go-hooks && \
	$$TINYGO build -target wasip1 -buildmode=c-shared -no-debug -scheduler=none -o go-hooks-tinygo.wasm .

rust: $(RUST_EXAMPLE)

$(RUST_EXAMPLE): $(wildcard guests/rust/src/*.rs guests/rust/src/*.md examples/rust-hooks/src/*.rs) guests/rust/Cargo.toml examples/rust-hooks/Cargo.toml examples/rust-hooks/.cargo/config.toml | tools-rust
	cd examples/rust-hooks && $(CARGO) build --release --target wasm32-unknown-unknown
	mkdir -p $(@D) && cp $(CARGO_TARGET_DIR)/wasm32-unknown-unknown/release/rust_hooks.wasm $@

# The host-target tests build in a target directory of their own: cargo
# locks a target directory while it builds, and these run beside the tests
# that build the Rust scaffold in the shared one (make test).
# The host-target test builds keep their target directory in the user
# cache, like the toolchains: a clean clone then rebuilds only morph's own
# crates (cargo's fingerprints), not serde and the derive macros (48 s of
# a cold run, 7 s warm, measured). cargo locks it between concurrent runs.
RUST_TEST_TARGET = $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/morph/cargo-host-tests

rust-test: tools-rust
	cd guests/rust && CARGO_TARGET_DIR=$(RUST_TEST_TARGET) $(CARGO) test
	cd guests/rust && CARGO_TARGET_DIR=$(RUST_TEST_TARGET) $(CARGO) test --no-default-features
	cd examples/rust-hooks && CARGO_TARGET_DIR=$(RUST_TEST_TARGET) $(CARGO) test --target $(RUST_HOST)

tools-rust:
	@scripts/rust-toolchain.sh

# bench prints the tables BENCHMARKS.md quotes: each benchmark -count 10,
# summarised by benchstat (median and 95% confidence interval); raw results
# in bench/out. BENCH=call,cold runs some groups only (see scripts/bench.sh).
BENCH ?=
COUNT ?= 10
comma := ,
bench: fixtures examples extism-guests tinygo-examples rust tools-mcp
	COUNT=$(COUNT) scripts/bench.sh $(subst $(comma), ,$(BENCH))

# Installs Debian's wabt once; a no-op when wat2wasm is already there.
tools-wabt:
	@command -v wat2wasm >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq wabt; }

# Installs mock-llm once; a no-op when it is there. npm installs into a
# temporary directory renamed into place, so a run cut short or another
# worktree's make running at the same time leaves no half-installed copy.
tools-mock-llm:
	@command -v node >/dev/null && command -v npm >/dev/null || \
	{ echo "tools-mock-llm: node and npm are needed to install @dwmkerr/mock-llm (Debian: apt-get install nodejs npm)" >&2; exit 1; }
	@test -x $(MOCK_LLM) || { \
	mkdir -p $(dir $(MOCK_LLM_DIR)) && tmp=$$(mktemp -d $(MOCK_LLM_DIR).XXXXXX) && \
	{ npm install --prefix $$tmp --no-audit --no-fund --loglevel=error @dwmkerr/mock-llm@$(MOCK_LLM_VERSION) >/dev/null || { rm -rf $$tmp; exit 1; }; } && \
	{ mv -T $$tmp $(MOCK_LLM_DIR) 2>/dev/null || rm -rf $$tmp; } && test -x $(MOCK_LLM); }

clean:
	rm -rf $(BIN) $(FIXTURES) $(EXAMPLES) $(EXTISM_GUESTS) $(TINYGO_EXAMPLES) target guests/rust/target examples/rust-hooks/target
