# The two commands of the quick start. Everything else they need, they install themselves.

.PHONY: dev test fuzz bench bench-async build

# Start the local stack and runner, seed a demo account and agent, print a curl to try.
dev:
	go run ./infra/cmd/dev

# The whole suite: formatting, vet, and every test against the local AWS stand-ins.
test:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './infra/node/*')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...
	go run ./infra/cmd/stack -- go test -race -count=1 ./...

# Every fuzz target (a func FuzzX in a _test.go file) for FUZZTIME each, one at a time, without
# the stack. The first failure stops the run; its input is left in the package's testdata/fuzz.
# Go 1.26's fuzz engine may fail a run at the deadline with a bare "context deadline exceeded"
# and no input (go.dev/issue/75804, fixed in Go 1.27): that is not a finding, and the run goes on.
# FUZZMINIMIZETIME bounds the shrinking of each new input (Go's default, 60s, spends whole runs
# of the provider targets, whose seeds are recorded streams of a few KB, shrinking instead of fuzzing).
FUZZTIME ?= 60s
FUZZMINIMIZETIME ?= 2s
fuzz:
	@log=$$(mktemp); trap 'rm -f $$log' EXIT; \
	grep -r --include='*_test.go' --exclude-dir=node -o '^func Fuzz[A-Za-z0-9_]*' . | sort | \
	  while IFS=: read -r file fn; do \
	    name=$${fn#func }; pkg=./$$(dirname $${file#./}); \
	    echo "go test -run '^$$' -fuzz '^$$name\$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg"; \
	    go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg 2>&1 | tee $$log; \
	    grep -q '^ok' $$log && continue; \
	    if grep -q '^    context deadline exceeded' $$log && ! grep -q 'Failing input written' $$log; then \
	      echo "$$name: the fuzz engine's deadline race (go.dev/issue/75804), not a finding"; continue; \
	    fi; \
	    exit 1; \
	  done

# Benchmark: harness turns vs the AI SDK on Node against the same local mock model, one 300-turn
# conversation that compacts (warm and cold: CPU, read units and p50 of its first and last ten
# turns), then each function alone on a Lambda Runtime API stand-in (cold start, CPU per turn,
# peak RSS, binary size).
bench:
	go run ./infra/cmd/stack -- go run ./infra/bench -turns 300

# Benchmark: external-dispatch completions, re-drive latency and write units on the local stack.
bench-async:
	go run ./infra/cmd/stack -- go run ./infra/bench -async

# Lambda bootstrap binaries for linux/arm64, stripped (-s: no symbol table or DWARF, which
# Lambda would download at each cold start; stack traces and profiles use the pclntab, kept).
# `GOFLAGS="-trimpath -ldflags=-s" sam build` builds the same.
build:
	for d in functions/*/; do \
	  GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -trimpath -ldflags=-s -tags lambda.norpc -o $$d/bootstrap ./$$d || exit 1; \
	done
