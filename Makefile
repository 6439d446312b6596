# nvcomm — see README.md. Every target works on a fresh clone with Go >= 1.26.
GO      ?= go
BIN     := bin/nvcomm
EXAMPLE := testdata/examples/allgather_loop_split.yaml
FUZZTIME ?= 60s
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

# nvcomm version prints the module version and commit from the build
# information; these override them (make build VERSION=v0.2.0). The commit
# is set here too because builds with -buildvcs=false record none.
VERSION ?=
COMMIT  ?= $(shell git describe --always --dirty --abbrev=12 --match=no-tag 2>/dev/null)
LDFLAGS := $(if $(VERSION),-X github.com/nvcomm/nvcomm/internal/cli.version=$(VERSION)) $(if $(COMMIT),-X github.com/nvcomm/nvcomm/internal/cli.commit=$(COMMIT))

.PHONY: build run test browser-note race golden bench bench-scale bench-auto fuzz lint tidy soak clean export-check

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/nvcomm

# Lower the bundled example of nvFuser PR #3284 and print its plan.
run: build
	$(BIN) lower --format text $(EXAMPLE)
	@echo
	$(BIN) lower $(EXAMPLE)

test: browser-note
	$(GO) vet ./...
	$(GO) test ./...

# The browser test of internal/report (TestBrowser) skips without headless
# Chromium, and go test shows no skip without -v: say so, once. BROWSERS is
# where the test looks (TestBrowserNote checks that the lists agree).
BROWSERS := /usr/bin/chromium chromium chromium-browser google-chrome google-chrome-stable
browser-note:
	@for b in $(BROWSERS); do command -v $$b >/dev/null 2>&1 && exit 0; done; \
	echo "note: no headless Chromium ($(BROWSERS)): the browser test (internal/report TestBrowser) is skipped; apt-get install chromium to run it"

# The race detector on the packages that run goroutines (cost's fits, ir's
# lazily built mesh index, the CLI's parallel in-process tests, export's
# tests, difftest's parallel random programs, and the simulator's work on
# long buffers in pieces, whose tests make buffers long enough to split).
# The CLI's scripts are left out (each re-runs the race-instrumented
# binary: a minute of start-ups), and so are the tests that compare peak
# RSS with an estimate, or the live heap with a bound, which the race
# detector's own memory would fail.
race:
	$(GO) test -race -short -skip 'TestScripts|TestEstimateWithinPeakRSS|TestSimulateMemoryGuard|TestReadingHoldsLittle' \
		./internal/cost ./internal/ir ./internal/syntax ./internal/cli ./internal/export ./internal/difftest
	$(GO) test -race -run 'TestInPieces|TestInputDataInPieces|TestCombineParts|TestParallelCopies' ./internal/sim

# Rewrite golden files; review the diff before committing.
golden:
	NVCOMM_UPDATE=1 $(GO) test ./...

# Every package's benchmarks but internal/scale's, whose inputs are big
# (bench-scale measures those).
bench:
	$(GO) test -run '^$$' -bench . -benchmem $$($(GO) list ./... | grep -v '/internal/scale$$')

# The scale report of docs/performance.md: lower, validate and simulate on
# generated inputs (every family of fusions at 10k and 100k ops, 64 MiB
# tensors, every 3-D mesh of 4,096 devices) beside YAML decoding and copy()
# measured in the same run, each ratio with its goal; it fails for every
# goal missed. A few minutes on 2 cores, a few GB of memory.
bench-scale:
	NVCOMM_SCALE=1 $(GO) test -count=1 -timeout 0 -run '^TestScaleReport$$' -v ./internal/scale

# The table of docs/auto.md: lower --auto's solve time on N identical MLP
# blocks, N = 1 to 32, on 1-D, 2-D and 3-D meshes.
bench-auto:
	NVCOMM_BENCH_AUTO=1 $(GO) test -count=1 -timeout 0 -run '^TestAutoScaleTable$$' -v ./internal/auto

fuzz:
	$(GO) test ./internal/ir -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/syntax -run '^$$' -fuzz '^FuzzFastDecode$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/syntax -run '^$$' -fuzz '^FuzzWriteBackward$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/plan -run '^$$' -fuzz '^FuzzDecodeValidate$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/plan -run '^$$' -fuzz '^FuzzFastDecode$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/lower -run '^$$' -fuzz '^FuzzCertify$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/cost -run '^$$' -fuzz '^FuzzParseTopology$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/cost -run '^$$' -fuzz '^FuzzFit$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/plan -run '^$$' -fuzz '^FuzzEncode$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/sim -run '^$$' -fuzz '^FuzzRun$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/sim -run '^$$' -fuzz '^FuzzRuns$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/checked -run '^$$' -fuzz '^FuzzArith$$' -fuzztime $(FUZZTIME) -parallel 2

# Lower and simulate a million random fusions; prints counts by outcome and
# rejection reason (SOAK=N for another count).
SOAK ?= 1000000
soak:
	NVCOMM_SOAK=$(SOAK) $(GO) test -count=1 -timeout 0 ./internal/difftest -run '^TestSoak$$' -v

lint:
	@test -z "$$(gofmt -l .)" || (gofmt -l . && false)
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# Fail when go.mod or go.sum is not tidy (go mod tidy prints the change).
tidy:
	$(GO) mod tidy -diff

# Export every plan to a torch.distributed program (docs/export.md); run
# build/export-check/run.sh on a machine with PyTorch and 2 GPUs.
export-check: build
	bash scripts/export-check/prepare.sh build/export-check

clean:
	rm -rf bin
