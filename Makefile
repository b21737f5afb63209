# morph: `make demo` runs the offline demo, `make test` runs every check CI runs.
GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build test fmt-check vet unit demo clean

all: build

build:
	$(GO) build -o $(BIN)/morph -ldflags '$(LDFLAGS)' ./cmd/morph

# test is what .ci/run runs: formatting, vet, and the race-enabled tests.
test: fmt-check vet unit

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

demo: build
	./$(BIN)/morph run --config morph.toml "What is 17.5% of 2,340 plus the square root of 1,764?"

clean:
	rm -rf $(BIN)
