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

test-unit: prereq-cc
	go test -race -count=1 $(UNIT_PKGS)
	cd $(STAGING) && go test -race -count=1 ./...

test-integration: install-test-binaries
	go test -count=1 -timeout 20m ./test/integration/...

## test-e2e: the built binary against a real control plane (flags, leader election,
## serving, and the swap test against upstream's binary built from the pinned module).
## It also runs the image (make image; Docker needed) as cluster/manifests/kube-controller-manager.yaml says.
test-e2e: build image
	hack/install-test-binaries.sh etcd kube-apiserver kube-controller-manager-upstream
	KCM_IMAGE=$(IMAGE):$(IMAGE_TAG) KCM_BINARY=$(BIN_DIR)/kube-controller-manager go test -count=1 -timeout 40m $$(go list ./test/e2e/... | grep -v /test/e2e/faults)

verify:
	hack/verify.sh

## run: a local cluster (etcd, kube-apiserver, kube-scheduler, kwok nodes) with our binary.
## NODES=3 runs the three-node control plane in containers instead (make run-multinode).
NODES ?= 1
run: prereq-tools build
	@if [ "$(NODES)" = 1 ]; then hack/local-up.sh; else $(MAKE) run-multinode NODES=$(NODES); fi

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

## Machine prerequisites: each check fails with one line naming what is missing.
.PHONY: prereq-go prereq-cc prereq-tools prereq-docker
prereq-go:
	@command -v go >/dev/null 2>&1 || { echo "missing prerequisite: go (Go 1.26, https://go.dev/dl)" >&2; exit 1; }
prereq-cc: prereq-go
	@cc=$$(go env CC); command -v "$${cc%% *}" >/dev/null 2>&1 || { echo "missing prerequisite: a C compiler ($$cc) for go test -race (apt-get install gcc)" >&2; exit 1; }
prereq-tools:
	@for t in curl openssl python3; do command -v $$t >/dev/null 2>&1 || { echo "missing prerequisite: $$t (used by hack/local-up.sh)" >&2; exit 1; }; done
prereq-docker:
	@command -v docker >/dev/null 2>&1 || { echo "missing prerequisite: docker (image and multi-node tests; or make image IMAGE_TOOL=go)" >&2; exit 1; }
	@docker info >/dev/null 2>&1 || { echo "missing prerequisite: a reachable Docker engine (docker info fails; is dockerd running, may this user use it?)" >&2; exit 1; }

## image: the container image (IMAGE:IMAGE_TAG) of a static build, FROM scratch, with the
## Docker engine; IMAGE_TOOL=go builds it with go-containerregistry instead (no engine:
## _output/image/kube-controller-manager.tar for docker load, and an OCI layout in _output/image/oci),
## loaded into Docker when an engine is reachable.
IMAGE      ?= kcmclone/kube-controller-manager
IMAGE_TAG  ?= $(KUBE_VERSION)
IMAGE_TOOL ?= docker
IMAGE_DIR  := $(CURDIR)/_output/image
IMAGE_SRC  := cluster/images/kube-controller-manager
.PHONY: image image-rootfs
image-rootfs: prereq-go
	rm -rf $(IMAGE_DIR)/rootfs
	mkdir -p $(IMAGE_DIR)/rootfs/usr/local/bin $(IMAGE_DIR)/rootfs/tmp
	chmod 1777 $(IMAGE_DIR)/rootfs/tmp
	cp -R $(IMAGE_SRC)/rootfs/. $(IMAGE_DIR)/rootfs/
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS) -s -w' \
		-o $(IMAGE_DIR)/rootfs/usr/local/bin/kube-controller-manager ./cmd/kube-controller-manager

ifeq ($(IMAGE_TOOL),go)
image: image-rootfs
	cd hack/tools/image && go run . -rootfs $(IMAGE_DIR)/rootfs -tag $(IMAGE):$(IMAGE_TAG) \
		-o $(IMAGE_DIR)/kube-controller-manager.tar -oci-layout $(IMAGE_DIR)/oci \
		-entrypoint /usr/local/bin/kube-controller-manager -user 0:0 -created $(BUILD_DATE) \
		-env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		-label org.opencontainers.image.title=kube-controller-manager \
		-label "org.opencontainers.image.description=Drop-in replacement for upstream kube-controller-manager" \
		-label org.opencontainers.image.version=$(KUBE_VERSION) -label org.opencontainers.image.revision=$(GIT_COMMIT)
	@if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then docker load -i $(IMAGE_DIR)/kube-controller-manager.tar; \
	else echo "wrote $(IMAGE_DIR)/kube-controller-manager.tar (docker load -i it) and $(IMAGE_DIR)/oci"; fi
else ifeq ($(IMAGE_TOOL),docker)
image: prereq-docker image-rootfs
	docker build -f $(IMAGE_SRC)/Dockerfile --build-arg VERSION=$(KUBE_VERSION) --build-arg REVISION=$(GIT_COMMIT) \
		-t $(IMAGE):$(IMAGE_TAG) $(IMAGE_DIR)
else
image:
	@echo "IMAGE_TOOL must be docker or go, not $(IMAGE_TOOL)" >&2; exit 1
endif

## fuzz: each fuzz target for FUZZTIME inputs (default 20000x; .ci/run uses 5000x), one after another.
# Budgets are counts, not durations: with go1.26 a duration's deadline can expire
# while the engine minimizes a new input, and that is reported as a failure with
# no crasher (golang/go#75804). Minimizing is capped for the same reason.
FUZZTIME ?= 20000x
FUZZMINIMIZETIME ?= 500x
FUZZ_TARGETS := \
	./cmd/kube-controller-manager/app/options:FuzzFlags \
	./pkg/controller/deployment:FuzzSelectorWithLabel \
	./pkg/controller/deployment:FuzzSyncDecodedDeployment \
	./pkg/controller/cronjob:FuzzScheduleHandling \
	./pkg/controller/nodeipam/ipam/cidrset:FuzzCIDRSet
.PHONY: fuzz
fuzz: prereq-go
	@mkdir -p _output
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "+++ fuzz $$fn ($$pkg) for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) -parallel 2 $$pkg > _output/fuzz-$$fn.log 2>&1 || \
		{ grep -v '^\s*sync.go:' _output/fuzz-$$fn.log | tail -n 40; echo "fuzz $$fn failed: see _output/fuzz-$$fn.log and $$pkg/testdata/fuzz/$$fn" >&2; exit 1; }; \
	done

## image-node: the fault bed's control-plane node image (NODE_IMAGE): the controller manager's image
## plus etcd, kube-apiserver, kube-scheduler, upstream's controller manager and node-init (PID 1).
NODE_IMAGE     ?= kcmclone/control-plane-node:dev
NODE_IMAGE_DIR := $(CURDIR)/_output/node-image
NODE_BINS      := etcd kube-apiserver kube-scheduler kube-controller-manager-upstream
.PHONY: image-node run-multinode e2e-faults failover
image-node: prereq-docker image
	hack/install-test-binaries.sh $(NODE_BINS)
	rm -rf $(NODE_IMAGE_DIR) && mkdir -p $(NODE_IMAGE_DIR)/bin
	for b in $(NODE_BINS); do cp -L $(BIN_DIR)/$$b $(NODE_IMAGE_DIR)/bin/; done
	CGO_ENABLED=0 go build -trimpath -o $(NODE_IMAGE_DIR)/bin/node-init ./test/e2e/faults/nodeinit
	docker build -f test/e2e/faults/image/Dockerfile --build-arg BASE=$(IMAGE):$(IMAGE_TAG) -t $(NODE_IMAGE) $(NODE_IMAGE_DIR)

## run-multinode: three control-plane node containers (NODES), kwok nodes on the host; prints a kubeconfig.
run-multinode: prereq-docker image-node
	hack/install-test-binaries.sh kwok
	NODES=$(NODES) NODE_IMAGE=$(NODE_IMAGE) hack/multinode.sh

## e2e-faults: the fault tests on the three-node bed (node loss, partition, slow apiserver, apiserver
## restart + etcd compaction, rolling upgrade). FAULTS=<regexp> runs some; KCMFAULT_PODS sizes the rollouts (300).
FAULTS ?= .
e2e-faults: prereq-docker image-node
	@mkdir -p _output
	KCMFAULT_IMAGE=$(NODE_IMAGE) go test -count=1 -timeout 60m -v -run '$(FAULTS)' ./test/e2e/faults/ 2>&1 | tee _output/e2e-faults.log

## failover: node-loss failover times, ours vs upstream's binary on the same bed (ROUNDS=3).
failover: prereq-docker image-node
	NODE_IMAGE=$(NODE_IMAGE) hack/faults/failover.sh
