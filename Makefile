# p2pkit — build, run and test.
#
#   make run    build p2pcheck and run it on this machine (the PCIe tree, then the node report)
#   make test   everything a fresh machine needs for the unit tier: vet, race tests, ISA variants
#
# Variables: GO (the go command), ARGS (extra p2pcheck arguments for `make run`).

SHELL     := /bin/bash
GO        ?= go
BIN       ?= bin
ARGS      ?=
STATICCHECK_VERSION ?= v0.8.2
GOTESTSUM ?= $(GO) run gotest.tools/gotestsum@v1.13.0
FUZZTIME  ?= 10s

.PHONY: all build build-static run test test-unit test-isa test-vm fuzz-smoke bench bench-topo bench-hostile lint clean

all: build

# cgo (the default where a C compiler exists) lets p2pcheck use NVML and gdrbench
# CUDA; build-static makes a p2pcheck that runs anywhere, without them.
build:
	$(GO) build -trimpath -o $(BIN)/p2pcheck ./cmd/p2pcheck
	$(GO) build -trimpath -o $(BIN)/gdrbench ./cmd/gdrbench

build-static:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/p2pcheck-static ./cmd/p2pcheck

run: build
	$(BIN)/p2pcheck topo $(ARGS)
	@echo
	@$(BIN)/p2pcheck $(ARGS); rc=$$?; echo "p2pcheck exit code: $$rc (0 ready, 1 a check failed, 2 warnings with --fail-on=warn, 3 could not evaluate)"

test: test-unit test-isa

test-unit:
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build ./...
	GOOS=darwin CGO_ENABLED=0 $(GO) build ./...
	$(GOTESTSUM) --format pkgname-and-test-fails -- -race -count=1 ./...

# The copy kernels again with every dispatch path: pure Go, and AVX2 switched off.
test-isa:
	$(GOTESTSUM) --format pkgname-and-test-fails -- -count=1 -tags purego ./gdrcopy/...
	GODEBUG=cpu.avx2=off,cpu.avx512f=off $(GOTESTSUM) --format pkgname-and-test-fails -- -count=1 ./gdrcopy/...

# The kernel-in-the-loop tier: boots real kernels under QEMU (see README). One line per
# guest, then the failing assertions if any.
test-vm:
	$(GO) test -count=1 -tags vmtest -timeout 60m -v -run TestTopologies ./internal/vmtest/ >vmtest.log 2>&1; rc=$$?; \
	grep -E '^(vmtest |--- FAIL|FAIL|ok )' vmtest.log; \
	if [ $$rc -ne 0 ]; then grep -E '^ +[a-z_]+_test\.go:[0-9]+:' vmtest.log | head -n 200; fi; exit $$rc

# Every fuzz target for FUZZTIME each; all are run, and the failing ones are listed
# at the end (non-zero exit if any failed).
fuzz-smoke:
	@failed=(); for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f"; log=$$(mktemp -t fuzz-$$f.XXXXXX.log); \
	    if ! $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg >$$log 2>&1; then \
	      tail -n 20 $$log; failed+=("$$pkg $$f (log: $$log)"); \
	    else rm -f $$log; fi; \
	  done; \
	done; \
	if [ $${#failed[@]} -gt 0 ]; then printf 'fuzz-smoke: FAILED %s\n' "$${failed[@]}"; exit 1; fi; \
	echo "fuzz-smoke: every target passed"

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pcie/ ./sysfs/ ./p2pdma/ ./render/
	$(GO) test -run '^$$' -bench . -benchtime 200ms -count 3 ./gdrcopy/internal/wccopy/

# Whole-process `p2pcheck topo` against `lspci -tv` on the 1,028-function synthetic
# machine (needs pciutils): medians of interleaved rounds, their ratio and peak RSS.
bench-topo: build
	$(GO) run ./internal/fixture/cmd/topobench -p2pcheck $(BIN)/p2pcheck

# Every input of the hostile snapshot corpus through the real binary: exit code, CPU
# seconds and peak RSS of each run, against 5 s and 256 MB (exit 1 past either).
bench-hostile: build
	$(GO) run ./internal/fixture/cmd/hostilebench -p2pcheck $(BIN)/p2pcheck

lint:
	$(GO) vet ./...
	test -z "$$(gofmt -l .)"
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

clean:
	rm -rf $(BIN) vmtest.log
