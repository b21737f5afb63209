# morph: `make demo` runs the offline demo, `make test` runs every check CI runs.
GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Test fixtures: hand-written WAT guests, one per fault the host must survive.
WAT     := $(wildcard guests/testdata/*.wat)
FIXTURES := $(WAT:.wat=.wasm)

.PHONY: all build test fmt-check vet unit demo clean fixtures tools-wabt

all: build

build:
	$(GO) build -o $(BIN)/morph -ldflags '$(LDFLAGS)' ./cmd/morph

# test is what .ci/run runs: formatting, vet, and the race-enabled tests.
test: fmt-check vet fixtures unit

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

demo: build
	./$(BIN)/morph run --config morph.toml "What is 17.5% of 2,340 plus the square root of 1,764?"

fixtures: $(FIXTURES)

guests/testdata/%.wasm: guests/testdata/%.wat | tools-wabt
	wat2wasm $< -o $@

# Installs Debian's wabt once; a no-op when wat2wasm is already there.
tools-wabt:
	@command -v wat2wasm >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq wabt; }

clean:
	rm -rf $(BIN) $(FIXTURES)
