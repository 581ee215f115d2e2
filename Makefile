# p2pkit — build, run and test.
#
#   make run    build p2pcheck and run it on this machine (the PCIe tree, then the node report)
#   make test   everything a fresh machine needs for the unit tier: vet, race tests, ISA variants
#   make release VERSION=vX.Y.Z   the release artefacts in dist/ (see README "Releases")
#
# Variables: GO (the go command), ARGS (extra p2pcheck arguments for `make run`),
# VERSION (the release), IMAGE (the image repository), PCI_IDS (the pci.ids the image ships),
# COPIES_CPU (the CPU make bench-copies times on).

SHELL     := /bin/bash
GO        ?= go
BIN       ?= bin
ARGS      ?=
STATICCHECK_VERSION ?= v0.8.2
GOTESTSUM ?= $(GO) run gotest.tools/gotestsum@v1.13.0
FUZZTIME  ?= 10s
FUZZMINEXECS ?= 100

# go-nvml's cgo preamble includes NVML headers that mark some functions deprecated;
# the compiler would print about 120 warnings about code that is not ours.
CGO_CFLAGS ?= -Wno-deprecated-declarations
export CGO_CFLAGS

VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# The image's creation time: the commit's (https://reproducible-builds.org/specs/source-date-epoch/).
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# Each evaluated once (and passed to the sub-makes), so that a commit made while a
# release builds cannot mix two.
VERSION   := $(VERSION)
COMMIT    := $(COMMIT)
SOURCE_DATE_EPOCH := $(SOURCE_DATE_EPOCH)
export VERSION COMMIT SOURCE_DATE_EPOCH
IMAGE     ?= ghcr.io/p2pkit/p2pcheck
PCI_IDS   ?= /usr/share/misc/pci.ids
DIST      ?= dist
LDFLAGS   := -X github.com/p2pkit/p2pkit/internal/buildinfo.version=$(VERSION) \
             -X github.com/p2pkit/p2pkit/internal/buildinfo.commit=$(COMMIT)
QEMU_ARM64 ?= qemu-aarch64-static

.PHONY: all build build-static run test test-unit test-isa test-vm test-arm64 test-deploy fuzz-smoke bench bench-topo bench-topo-live bench-copies gdrapi-peer lint clean \
	release release-check image image-check bench-hostile bench-scale

all: build

# cgo (the default where a C compiler exists) lets p2pcheck use NVML and gdrbench
# CUDA; build-static makes a p2pcheck that runs anywhere, without them.
build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/p2pcheck ./cmd/p2pcheck
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/gdrbench ./cmd/gdrbench

build-static:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/p2pcheck-static ./cmd/p2pcheck

# Releases: static (CGO_ENABLED=0) p2pcheck and gdrbench for linux/amd64 and
# linux/arm64, p2pcheck with NVML (cgo) for linux/amd64, the container image
# (an OCI layout archive, built without a daemon) and the DaemonSet with the
# image's tag, all with SHA-256 sums in dist/SHA256SUMS.
release:
	@[[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]] || { echo "usage: make release VERSION=vX.Y.Z (not '$(VERSION)')" >&2; exit 64; }
	rm -rf $(DIST)
	set -e; for arch in amd64 arm64; do for cmd in p2pcheck gdrbench; do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(DIST)/linux_$$arch/$$cmd ./cmd/$$cmd; \
	done; done
	CGO_ENABLED=1 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(DIST)/linux_amd64_nvml/p2pcheck ./cmd/p2pcheck
	mkdir -p $(DIST)/man && SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(DIST)/linux_amd64/p2pcheck man $(DIST)/man
	$(MAKE) --no-print-directory image
	sed 's|image: $(IMAGE):.*|image: $(IMAGE):$(VERSION)|' deploy/kubernetes/daemonset.yaml >$(DIST)/daemonset.yaml
	grep -q 'image: $(IMAGE):$(VERSION)$$' $(DIST)/daemonset.yaml
	cp deploy/nhc/p2pcheck.nhc LICENSE $(DIST)/
	cd $(DIST) && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS
	$(MAKE) --no-print-directory release-check

# What a release must be: each binary says its version, the static ones are
# static, the arm64 ones are aarch64 ELF files, the sums hold, the image runs.
release-check:
	cd $(DIST) && sha256sum --quiet -c SHA256SUMS
	set -e; for f in linux_amd64/p2pcheck linux_amd64/gdrbench linux_amd64_nvml/p2pcheck; do \
	  v=$$($(DIST)/$$f --version); echo "$$v"; echo "$$v" | grep -q ' $(VERSION) commit=$(shell echo $(COMMIT) | cut -c1-12) '; done
	$(DIST)/linux_amd64/p2pcheck --version | grep -q ' nvml=false cuda=false '
	test -s $(DIST)/man/p2pcheck.1 && test -s $(DIST)/man/p2pcheck-report.1
	$(DIST)/linux_amd64_nvml/p2pcheck --version | grep -q ' nvml=true cuda=true '
	set -e; for f in linux_amd64/p2pcheck linux_amd64/gdrbench linux_arm64/p2pcheck linux_arm64/gdrbench; do \
	  ! readelf -lW $(DIST)/$$f | grep -q INTERP || { echo "$$f is not static" >&2; exit 1; }; done
	set -e; for f in linux_arm64/p2pcheck linux_arm64/gdrbench; do \
	  readelf -hW $(DIST)/$$f | grep -q 'Machine: *AArch64' || { echo "$$f is not an aarch64 ELF" >&2; exit 1; }; \
	  if command -v $(QEMU_ARM64) >/dev/null; then $(QEMU_ARM64) $(DIST)/$$f --version | grep ' $(VERSION) .*platform=linux/arm64$$'; fi; done
	$(MAKE) --no-print-directory image-check

# The man pages of every command (p2pcheck man) in bin/man.
.PHONY: man
man: build
	mkdir -p $(BIN)/man && SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/p2pcheck man $(BIN)/man

# The container image, from the release's static binaries.
image:
	cd deploy && $(GO) run ./cmd/p2pcheck-image build -o ../$(DIST)/p2pcheck-image.oci.tar \
	  -version $(VERSION) -revision $(COMMIT) -created $(SOURCE_DATE_EPOCH) -repository $(IMAGE) -pci-ids $(PCI_IDS) \
	  amd64=../$(DIST)/linux_amd64/p2pcheck arm64=../$(DIST)/linux_arm64/p2pcheck

# Unpacks the amd64 image and runs its p2pcheck (scripts/check-image.sh).
image-check:
	GO=$(GO) bash scripts/check-image.sh $(DIST)/p2pcheck-image.oci.tar $(VERSION)

run: build
	$(BIN)/p2pcheck topo $(ARGS)
	@echo
	@$(BIN)/p2pcheck $(ARGS); rc=$$?; echo "p2pcheck exit code: $$rc (0 ready, 1 a check failed, 2 warnings with --fail-on=warn, 3 could not evaluate)"

test: test-unit test-isa

test-unit:
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build ./...
	GOOS=darwin CGO_ENABLED=0 $(GO) build ./...
	GOOS=darwin CGO_ENABLED=0 $(GO) vet ./...
	$(GOTESTSUM) --format pkgname-and-test-fails -- -race -count=1 -timeout 30m ./...

# The copy kernels again with every dispatch path: pure Go, and AVX2 switched off.
test-isa:
	$(GOTESTSUM) --format pkgname-and-test-fails -- -count=1 -tags purego ./gdrcopy/...
	GODEBUG=cpu.avx2=off,cpu.avx512f=off $(GOTESTSUM) --format pkgname-and-test-fails -- -count=1 ./gdrcopy/...

# The tests for linux/arm64 (GH200 and GB200 nodes), built without cgo as the
# arm64 release is, each test binary run under qemu-user: the packages whose code
# depends on the architecture (the copy kernels in assembly, the gdrdrv ABI and
# mappings, raw syscalls, byte order in config space) and the verdict engine.
# The others hold no architecture-dependent code and take minutes under emulation.
ARM64_PKGS ?= ./gdrcopy/... ./hostfs/... ./sysfs/... ./procfs/... ./snapshot/... ./pcie/... ./p2pdma/... ./pathclass/... ./internal/gdrready/...
test-arm64:
	CGO_ENABLED=0 GOARCH=arm64 $(GO) test -count=1 -exec $(QEMU_ARM64) $(ARM64_PKGS)

# The deploy module (deploy/go.mod): the manifests decoded strictly against the
# Kubernetes API types, scheduling by their own selectors, the image builder.
test-deploy:
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 ./...

# The kernel-in-the-loop tier: boots real kernels under QEMU (see README). One line per
# guest, then the failing assertions if any.
test-vm:
	$(GO) test -count=1 -tags vmtest -timeout 60m -v -run TestTopologies ./internal/testtools/vmtest/ >vmtest.log 2>&1; rc=$$?; \
	grep -E '^(vmtest |--- FAIL|FAIL|ok )' vmtest.log; \
	if [ $$rc -ne 0 ]; then grep -E '^ +[a-z_]+_test\.go:[0-9]+:' vmtest.log | head -n 200; fi; exit $$rc

# Every fuzz target for FUZZTIME each; all are run, each one's executions are
# printed, and the failing ones (a crash, or fewer than FUZZMINEXECS executions:
# no real progress) are listed at the end (non-zero exit if any failed). New
# inputs are not minimized (-fuzzminimizetime 0): minimizing each new input takes
# up to a minute by default, so a target whose seeds find new coverage at once
# (FuzzReadSnapshot) spent all of FUZZTIME minimizing and made 4 executions.
fuzz-smoke:
	@failed=(); summary=(); for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f"; log=$$(mktemp -t fuzz-$$f.XXXXXX.log); \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 0 $$pkg >$$log 2>&1; rc=$$?; \
	    execs=$$(grep -oE 'execs: [0-9]+' $$log | tail -n 1 | grep -oE '[0-9]+'); execs=$${execs:-0}; \
	    summary+=("$$(printf '%10d  %s %s' $$execs $$pkg $$f)"); \
	    if [ $$rc -ne 0 ] || [ $$execs -lt $(FUZZMINEXECS) ]; then \
	      tail -n 20 $$log; failed+=("$$pkg $$f ($$execs executions; log: $$log)"); \
	    else rm -f $$log; fi; \
	  done; \
	done; \
	printf 'fuzz-smoke: executions per target in %s:\n' $(FUZZTIME); printf '%s\n' "$${summary[@]}"; \
	if [ $${#failed[@]} -gt 0 ]; then printf 'fuzz-smoke: FAILED %s\n' "$${failed[@]}"; exit 1; fi; \
	echo "fuzz-smoke: every target passed"

# The README's benchmark table: the Go benchmarks in interleaved rounds, each beside
# an anchor timed in the same run (internal/testtools/fixture/cmd/benchtable), as Markdown.
bench:
	$(GO) run ./internal/testtools/fixture/cmd/benchtable
	$(GO) test -run '^$$' -bench . -benchtime 200ms -count 3 ./gdrcopy/internal/wccopy/

# The libgdrapi peer of gdrbench apiperf --copies, built against a gdrcopy source
# tree (GDRCOPY_SRC: a clone of https://github.com/NVIDIA/gdrcopy, e.g. at tag v2.6;
# none is kept here), and the copies timed beside it and beside gdrbench itself
# (the A/A run), every side's on CPU COPIES_CPU (--cpu: the timing threads only, so
# that the Go runtime's other threads do not share it), as the README's copies table.
gdrapi-peer:
	@test -n "$(GDRCOPY_SRC)" || { echo 'gdrapi-peer: set GDRCOPY_SRC to a gdrcopy source tree (git clone -b v2.6 https://github.com/NVIDIA/gdrcopy)' >&2; exit 2; }
	@mkdir -p $(BIN)
	scripts/build-gdrapi-peer.sh $(GDRCOPY_SRC) $(BIN)/gdrapi-peer

COPIES_CPU ?= 1
bench-copies: build gdrapi-peer
	$(BIN)/gdrbench apiperf --copies --cpu $(COPIES_CPU) --rounds 201 --peer $(BIN)/gdrapi-peer
	$(BIN)/gdrbench apiperf --copies --cpu $(COPIES_CPU) --rounds 201 --peer '$(BIN)/gdrbench apiperf --copies --serve'

# Whole processes on the 1,028-function synthetic machine (needs pciutils): `p2pcheck
# topo` against `lspci -tv`, the report and --quick against topo, and snapshot -o, in
# interleaved rounds quiet and beside a busy loop; prints the README's process table
# with the target each figure is held to.
bench-topo: build
	$(GO) run ./internal/testtools/fixture/cmd/topobench -p2pcheck $(BIN)/p2pcheck -all -load 0,1 -markdown

# `topo` against `lspci -tv` on a real sysfs: a QEMU (TCG) guest of the P2PDMA test
# kernel with about a thousand PCI functions (SR-IOV NVMe VFs behind switches); add
# LIVEBENCH_ARGS='-baseline OLD-STATIC-BINARY' to time an earlier build beside it.
bench-topo-live: build-static
	$(GO) run ./internal/testtools/vmtest/cmd/livebench -p2pcheck $(BIN)/p2pcheck-static $(LIVEBENCH_ARGS)

# Every input of the hostile snapshot corpus through the real binary (a valid tree
# through topo and matrix too): exit code, CPU seconds, peak RSS and output of each
# run, against 5 s and 256 MB (exit 1 past either).
bench-hostile: build
	$(GO) run ./internal/testtools/fixture/cmd/hostilebench -p2pcheck $(BIN)/p2pcheck

# The README's scaling tables: topo, topo json, pairs --all, the report, --quick, matrix,
# nccl and snapshot on synthetic machines of 100 to 50,000 functions and 8 to 576 GPUs,
# wall, CPU, peak RSS and output of each, and the growth exponent per command. The trees
# are written to SCALE_DIR (about 6 GB at 50,000 functions; a tmpfs is fastest).
SCALE_DIR ?= /dev/shm
bench-scale: build
	$(GO) run ./internal/testtools/fixture/cmd/scalebench -p2pcheck $(BIN)/p2pcheck -dir $(SCALE_DIR)

lint:
	$(GO) vet ./...
	test -z "$$(gofmt -l .)"
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

clean:
	rm -rf $(BIN) $(DIST) vmtest.log

# Regenerate README's runnable examples from p2pcheck's output (captured ones are only checked).
.PHONY: readme
readme:
	$(GO) test -count=1 -run TestREADMEExamples ./cmd/p2pcheck -update
