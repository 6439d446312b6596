# nvcomm — see README.md. Every target works on a fresh clone with Go >= 1.26.
GO      ?= go
BIN     := bin/nvcomm
EXAMPLE := testdata/examples/allgather_loop_split.yaml
FUZZTIME ?= 60s

.PHONY: build run test golden bench fuzz lint soak clean export-check

build:
	$(GO) build -o $(BIN) ./cmd/nvcomm

# Lower the bundled seed example (nvFuser PR #3284) and print its plan.
run: build
	$(BIN) lower --format text $(EXAMPLE)
	@echo
	$(BIN) lower $(EXAMPLE)

test:
	$(GO) vet ./...
	$(GO) test ./...

# Rewrite golden files; review the diff before committing.
golden:
	NVCOMM_UPDATE=1 $(GO) test ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

fuzz:
	$(GO) test ./internal/ir -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/plan -run '^$$' -fuzz '^FuzzDecodeValidate$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/lower -run '^$$' -fuzz '^FuzzCertify$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/cost -run '^$$' -fuzz '^FuzzParseTopology$$' -fuzztime $(FUZZTIME) -parallel 2
	$(GO) test ./internal/cost -run '^$$' -fuzz '^FuzzFit$$' -fuzztime $(FUZZTIME) -parallel 2

# Lower and simulate a million random fusions; prints counts by outcome and
# rejection reason (SOAK=N for another count).
SOAK ?= 1000000
soak:
	NVCOMM_SOAK=$(SOAK) $(GO) test -count=1 -timeout 0 ./internal/difftest -run '^TestSoak$$' -v

lint:
	@test -z "$$(gofmt -l .)" || (gofmt -l . && false)
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Export every plan to a torch.distributed program (docs/export.md); run
# build/export-check/run.sh on a machine with PyTorch and 2 GPUs.
export-check: build
	bash scripts/export-check/prepare.sh build/export-check

clean:
	rm -rf bin
