# jobplane: `make run` starts everything, `make test` tests everything.
# Binaries this needs (Kubernetes components, buf, protoc plugins, grpcurl) are
# built from pinned Go modules into a cache outside git (hack/build-bins.sh).

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# Every package of every module in go.work.
PACKAGES := github.com/jobplane/jobplane/...
SERVICES := planner executor cron

# Built on first use, cached afterwards; recursive so that targets which do
# not need them never build them.
TOOLS_BIN = $(shell hack/build-bins.sh tools | tail -n 1)
CLUSTER_BIN = $(shell hack/build-bins.sh cluster | tail -n 1)

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

.PHONY: run
run: build tools ## Build, start the local cluster and the three services, print grpcurl commands.
	hack/run.sh

.PHONY: test
test: lint cluster-bins ## Every test: lint, unit, gRPC, integration (real kube-apiserver) and end-to-end (kwok cluster).
	JOBPLANE_CLUSTER_BIN="$(CLUSTER_BIN)" go test -race -count=1 -timeout 30m $(PACKAGES)
	cd hack/refbench && GOWORK=off go test -count=1 -run '^(TestThePlannerAgreesWithTheReference|TestTheCronServiceAgreesWithTheReference)$$' .
	go test -run '^$$' -fuzz '^FuzzPlanSync$$' -fuzztime 30s -fuzzminimizetime 50x ./services/planner/internal/svc/
	go test -run '^$$' -fuzz '^FuzzPlanSyncDelta$$' -fuzztime 20s -fuzzminimizetime 50x ./services/planner/internal/svc/
	go test -run '^$$' -fuzz '^FuzzDecodeStreamRequest$$' -fuzztime 15s -fuzzminimizetime 50x ./services/planner/internal/svc/
	go test -run '^$$' -fuzz '^FuzzDecodePod$$' -fuzztime 15s -fuzzminimizetime 50x ./lib/podwire/
	go test -run '^$$' -fuzz '^FuzzAppendPod$$' -fuzztime 15s -fuzzminimizetime 50x ./lib/podwire/
	go test -run '^$$' -fuzz '^FuzzPlanCronJob$$' -fuzztime 15s -fuzzminimizetime 50x ./services/cron/internal/svc/

.PHONY: test-unit
test-unit: ## Unit and gRPC tests, no cluster binaries (go test -short).
	go test -short -count=1 $(PACKAGES)

.PHONY: fuzz
fuzz: ## Fuzz PlanSync, its deltas, the pods' wire encoding and PlanCronJob for FUZZTIME each (default 10m), then keep what they found in the committed corpora.
	for spec in FuzzPlanSync:services/planner/internal/svc FuzzPlanSyncDelta:services/planner/internal/svc \
		FuzzDecodeStreamRequest:services/planner/internal/svc FuzzDecodePod:lib/podwire \
		FuzzAppendPod:lib/podwire FuzzPlanCronJob:services/cron/internal/svc; do \
		target=$${spec%%:*} dir=$${spec#*:}; \
		go test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(or $(FUZZTIME),10m) -fuzzminimizetime 200x ./$$dir/; \
		mkdir -p $$dir/testdata/fuzz/$$target; \
		cp -n "$$(go env GOCACHE)"/fuzz/github.com/jobplane/jobplane/$$dir/$$target/* \
			$$dir/testdata/fuzz/$$target/ 2>/dev/null || true; \
	done

.PHONY: conformance
conformance: ## The reference's Job and CronJob controller integration tests (k8s.io/kubernetes v1.36.3 test/integration/job and cronjob) against jobplane in drop-in mode; writes CONFORMANCE.md. RUN=regexp for some tests.
	hack/conformance.sh

.PHONY: bench
bench: ## The planner's benchmarks (engine, gRPC vs a no-op handler) as markdown tables.
	hack/bench-planner.sh

.PHONY: build
build: ## Build the three service binaries into bin/.
	@mkdir -p bin
	for s in $(SERVICES); do go build -o bin/$$s ./services/$$s/cmd/$$s; done

.PHONY: generate
generate: tools ## Regenerate gen/ from proto/.
	rm -rf gen/jobplane
	PATH="$(TOOLS_BIN):$$PATH" buf generate --path proto/jobplane

.PHONY: lint
lint: tools ## gofmt, go vet, staticcheck, buf lint, buf format, and generated code up to date.
	@unformatted=$$(gofmt -l lib services gen hack); \
	if [[ -n $$unformatted ]]; then echo "not gofmt-ed (run gofmt -w):" >&2; echo "$$unformatted" >&2; exit 1; fi
	go vet $(PACKAGES)
	"$(TOOLS_BIN)/staticcheck" $(PACKAGES)
	PATH="$(TOOLS_BIN):$$PATH" buf lint
	PATH="$(TOOLS_BIN):$$PATH" buf format --diff --exit-code
	hack/check-generated.sh
	hack/check-pins.sh

.PHONY: tools
tools: ## Build buf, protoc-gen-go, protoc-gen-go-grpc, staticcheck and grpcurl (bin/grpcurl).
	@mkdir -p bin
	@ln -sf "$(TOOLS_BIN)/grpcurl" bin/grpcurl

.PHONY: cluster-bins
cluster-bins: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, kwokctl.
	@hack/build-bins.sh cluster >/dev/null

.PHONY: cluster-up
cluster-up: ## Start the local cluster (NODES kwok nodes, default 3); idempotent.
	hack/cluster.sh up $(or $(NODES),3)

.PHONY: cluster-down
cluster-down: ## Delete the local cluster.
	hack/cluster.sh down

.PHONY: clean
clean: ## Remove bin/ (the cache outside git stays).
	rm -rf bin
