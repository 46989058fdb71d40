# kube-controller-manager clone: build, test, run a local cluster.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

BIN_DIR      := $(CURDIR)/_output/bin
GIT_COMMIT   := $(shell git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)
GIT_TREE     := $(shell git diff --quiet HEAD 2>/dev/null && echo clean || echo dirty)
KUBE_VERSION ?= v1.37.2-kcmclone
BUILD_DATE   := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
VERSION_PKG  := k8s.io/component-base/version
# Both version packages, as upstream's build does: component-base's for
# --version and metrics, client-go's for the user agent of every request.
VERSION_LDFLAGS = -X $(1).gitVersion=$(KUBE_VERSION) \
                -X $(1).gitMajor=1 -X $(1).gitMinor=37 \
                -X $(1).gitCommit=$(GIT_COMMIT) \
                -X $(1).gitTreeState=$(GIT_TREE) \
                -X $(1).buildDate=$(BUILD_DATE)
LDFLAGS      := $(call VERSION_LDFLAGS,$(VERSION_PKG)) $(call VERSION_LDFLAGS,k8s.io/client-go/pkg/version)
GOLANGCI_LINT_VERSION := v2.15.0
STAGING      := staging/src/github.com/kcmclone/controller-manager
# Packages of the root module with unit tests (integration and e2e run apart).
UNIT_PKGS    = $$(go list ./... | grep -v -e /test/integration -e /test/e2e)

.PHONY: all build test test-unit test-integration test-e2e verify run conformance conformance-negative conformance-table test-conformance-runner install-test-binaries clean

all: build

build:
	go build -ldflags '$(LDFLAGS)' -o $(BIN_DIR)/kube-controller-manager ./cmd/kube-controller-manager

install-test-binaries:
	hack/install-test-binaries.sh etcd kube-apiserver

## test: unit tests (with -race) and integration tests against a real etcd + kube-apiserver.
test: test-unit test-conformance-runner test-integration test-e2e

test-unit:
	go test -race -count=1 $(UNIT_PKGS)
	cd $(STAGING) && go test -race -count=1 ./...

test-integration: install-test-binaries
	go test -count=1 -timeout 20m ./test/integration/...

## test-e2e: the built binary against a real control plane (flags, leader election,
## serving, and the swap test against upstream's binary built from the pinned module).
test-e2e: build
	hack/install-test-binaries.sh etcd kube-apiserver kube-controller-manager-upstream
	KCM_BINARY=$(BIN_DIR)/kube-controller-manager go test -count=1 -timeout 15m ./test/e2e/...

verify:
	hack/verify.sh

## run: a local cluster (etcd, kube-apiserver, kube-scheduler, kwok nodes) with our binary.
run: build
	hack/local-up.sh

## conformance: upstream v1.37.2 [Conformance] e2e specs on the kwok bed, compared with upstream KCM's
## results (AREA=all|apiserver-crud|replicaset-deployment|statefulset-daemonset|batch|namespace-gc|policy-quota|
## network-node|storage-dra-policy; ORACLE=1 refreshes test/conformance/upstream-results.txt; KCM_BIN=<binary>
## judges another binary). A plain AREA=all run records ours in test/conformance/ours-results.txt.
conformance: build
	ORACLE=$(ORACLE) KCM_BIN=$(KCM_BIN) hack/conformance.sh $(AREA)

## conformance-negative: the runner must fail with a controller off (two ResourceQuota specs, a few minutes;
## builds e2e.test first if missing).
conformance-negative: build
	test/conformance/negative.sh

## conformance-table: the README's conformance table, from test/conformance/{upstream,ours}-results.txt.
conformance-table:
	@hack/conformance.sh --table

## test-conformance-runner: unit tests of the runner's judge (test/conformance/compare.py).
test-conformance-runner:
	cd test/conformance && PYTHONDONTWRITEBYTECODE=1 python3 -m unittest compare_test

clean:
	rm -rf _output

## bench: rollout bench, ours vs upstream's KCM, same build and flags (BENCH_SIZES=1000 BENCH_ROUNDS=3; report in _output/bench/rollout.md).
.PHONY: bench bench-build
bench:
	hack/bench/rollout.sh

# Ours built the way hack/install-test-binaries.sh builds upstream's, for the bench.
bench-build:
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS) -s -w' -o $(BIN_DIR)/kube-controller-manager-bench ./cmd/kube-controller-manager
