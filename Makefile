# toolaudit: the two commands a user needs are `make demo` (run it) and
# `make test` (test it). See README.md.

GO       ?= go
BIN      ?= bin
PKGS     ?= ./...

.PHONY: all build test vet fmt-check staticcheck tidy-check fuzz bench check-sample demo demo-stop clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# The test command of the README and of CI: go test's usual output, then
# the list of tests that skipped (a package whose engine tests skipped
# still prints ok); the exit status is go test's. See cmd/testreport.
# resolveclient is a module of its own (see its doc): every check below
# runs in it too (./... of this module stops at its go.mod). Its tests
# run first: the run's last lines are then the whole module's.
#
# Everything runs with CGO_ENABLED=0, as the image is built (no package of
# the module uses cgo; the embedded engine is loaded by purego): the test
# binaries, the commands the tests build (internal/testkit/bins) and the
# image's build in deploy's TestDockerfile then share one build cache,
# where a cgo build beside a static one compiled every package twice.
#
# -vet=off: the vet prerequisite above already ran every analyzer go
# test would (about 4 CPU seconds each run).
#
# -parallel 4: the tests that call t.Parallel (e2e's, each with its own
# broker and database, mostly waiting on the binaries they kill and
# restart) run four at a time; no other package has any.
#
# -p 4 and SLOW_PKGS first: the test binaries mostly wait (engines
# starting, processes killed and restarted, timeouts on purpose), about
# 1.2 of 2 cores busy two packages at a time; four at a time, the slowest
# started first (go test starts packages in the order given; a package
# named twice runs once), take 2:45 where two took 3:40 (docs/testing.md,
# "Time"; the list follows its table). A name here that is no package
# fails the run.
#
# TEST_TMPDIR (TMPDIR of the run: t.TempDir, the engines' data, the
# commands internal/testkit/bins builds): a tmpfs when /dev/shm has 4 GiB
# free, else the system's. On a disk the engines' metadata fsyncs and
# the removal of every test's directory cost more CPU than the tests'
# work: sink took 30 CPU s (17 of them the kernel's) on the VM's ext4,
# 15 on tmpfs (docs/testing.md, "Time"). The run holds a few hundred MB
# there at most. TEST_TMPDIR= keeps the system's.
TEST_TMPDIR ?= $(shell d=/dev/shm; [ -d $$d ] && [ "$$(df -Pk $$d 2>/dev/null | awk 'NR==2 {print $$4}')" -ge 4194304 ] 2>/dev/null && echo $$d/toolaudit-test-$$(id -u))
SLOW_PKGS ?= ./e2e ./cmd/resolverd ./stream ./report ./chengine ./kafkaconf ./embedded ./modelproxy ./sink ./signature ./gateway ./registry ./htb ./analytics
test: export CGO_ENABLED = 0
test: fmt-check vet staticcheck tidy-check
	@$(GO) build -o $(BIN)/testreport ./cmd/testreport
	$(if $(TEST_TMPDIR),@mkdir -p $(TEST_TMPDIR))
	cd resolveclient && $(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR)) $(abspath $(BIN))/testreport -- $(GO) test -json -count=1 ./...
	$(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR)) $(BIN)/testreport -- $(GO) test -json -count=1 -vet=off -p 4 -parallel 4 -timeout 20m $(if $(filter ./...,$(PKGS)),$(SLOW_PKGS)) $(PKGS)

vet:
	$(GO) vet $(PKGS)
	cd resolveclient && $(GO) vet ./...

# staticcheck, pinned, with its default checks (dashboards/staticcheck.conf
# says why that package leaves one out). go run fetches it from the module
# proxy once; it is not a dependency of the module.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
staticcheck:
	$(GO) run $(STATICCHECK) $(PKGS)
	cd resolveclient && $(GO) run $(STATICCHECK) ./...

# go.mod and go.sum say exactly what the code imports.
tidy-check:
	$(GO) mod tidy -diff
	cd resolveclient && $(GO) mod tidy -diff

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Run each fuzz target for FUZZTIME (default 60s). FuzzParse: the strict
# parser against encoding/json; FuzzCheck: arbitrary listings and calls
# files through check, for crashes and for time per byte.
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./jsontape/
	$(GO) test -run '^$$' -fuzz FuzzCheck -fuzztime $(FUZZTIME) ./check/
	$(GO) test -run '^$$' -fuzz FuzzDecodeCall -fuzztime $(FUZZTIME) ./schema/
	$(GO) test -run '^$$' -fuzz FuzzDecodeListing -fuzztime $(FUZZTIME) ./schema/
	$(GO) test -run '^$$' -fuzz FuzzResolve -fuzztime $(FUZZTIME) ./resolve/
	$(GO) test -run '^$$' -fuzz FuzzDifferentialOracle -fuzztime $(FUZZTIME) ./signature/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./audit/
	$(GO) test -run '^$$' -fuzz FuzzLoadCheckpoint -fuzztime $(FUZZTIME) ./registry/
	$(GO) test -run '^$$' -fuzz FuzzDifferentialGenerated -fuzztime $(FUZZTIME) ./signature/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./otlp/
	$(GO) test -run '^$$' -fuzz FuzzTranslate -fuzztime $(FUZZTIME) ./signature/ecmare/
	$(GO) test -run '^$$' -fuzz FuzzFormats -fuzztime $(FUZZTIME) ./signature/format/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./approvals/
	$(GO) test -run '^$$' -fuzz FuzzReadLock -fuzztime $(FUZZTIME) ./approvals/
	$(GO) test -run '^$$' -fuzz FuzzUpstream -fuzztime $(FUZZTIME) ./modelproxy/
	$(GO) test -run '^$$' -fuzz FuzzConvert -fuzztime $(FUZZTIME) ./ingest/

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./resolve/

# The main command: the whole pipeline on loopback (see scripts/demo.sh).
demo:
	@scripts/demo.sh

demo-stop:
	@if [ -f .demo/resolverd.pid ]; then kill -INT $$(cat .demo/resolverd.pid) 2>/dev/null || true; rm -f .demo/resolverd.pid; echo "resolverd stopped"; fi

# The worked example of docs/commands.md (resolverd check): decide the shared sample and score it.
check-sample: build
	$(BIN)/resolverd check --listings testdata/corpus/sample/listings.jsonl \
	  --calls testdata/corpus/sample/calls.jsonl > $(BIN)/sample.decisions.jsonl
	python3 testdata/corpus/score.py testdata/corpus/sample/expected.jsonl $(BIN)/sample.decisions.jsonl

clean: demo-stop
	rm -rf $(BIN) .demo
