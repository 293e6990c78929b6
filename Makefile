# Every target sets up what it needs: a virtualenv from uv.lock and the
# upstream control-plane binaries, cached outside the repo.
CACHE ?= $(HOME)/.cache/trainium-dra
UV_VERSION := 0.13.8
UV := $(CACHE)/uv-$(UV_VERSION)/bin/uv
VENV := .venv
PY := $(VENV)/bin/python
BIN_DIR_FILE := build/bin-dir
# The one setting that picks the Kubernetes release of the control plane, the
# real nodes and kind; empty means the one hack/k8s/go.mod pins (v1.37.2).
# `make test` also runs the examples and the real nodes on K8S_PREVIOUS.
K8S_VERSION ?=
export K8S_VERSION
K8S_PREVIOUS := v1.36.3
PREVIOUS_BIN_DIR_FILE := build/bin-dir-previous
GO_PLUGIN_FILE := build/dra-example-driver
WITH_BINARIES = TRAINIUM_DRA_BIN_DIR=$$(cat $(BIN_DIR_FILE))
# A command's output into a file of build/ whole or not at all: make test's
# lanes read these files while another lane's set-up may write them again.
into = > $(1).$$$$.tmp && mv -f $(1).$$$$.tmp $(1)

.PHONY: venv binaries control-plane-binaries promtool kueue lws node-packages dra-example-driver image previous-binaries test test-stand-in test-real-nodes test-kind test-previous test-previous-examples test-previous-real-nodes lint unit demo demo-nodes demo-stop guard-races pages whatif whatif-live bench-whatif bench-whatif-live bench-sim bench-controller bench-scale bench-storage bench-usoperator bench-usoperator-scale bench-scheduler scheduler-counters-first test-counters-first bench-node bench-realnodes bench-realrack bench-first-demo bench-first-test validate-sim sim-collectives chaos clean

$(UV):
	python3 -m venv $(CACHE)/uv-$(UV_VERSION)
	$(CACHE)/uv-$(UV_VERSION)/bin/pip install --quiet uv==$(UV_VERSION)

# Bytecode compiled at install: with PYTHONDONTWRITEBYTECODE set (as in many CI
# shells) every process would otherwise compile kubernetes and kopf from source
# at each start, seconds per controller or daemon.
$(VENV)/.synced: pyproject.toml uv.lock | $(UV)
	UV_PROJECT_ENVIRONMENT=$(VENV) $(UV) sync --frozen --quiet --compile-bytecode
	touch $@

# The kubelet gRPC message modules are generated from our .proto files, never committed.
$(VENV)/.protos: $(VENV)/.synced $(wildcard driver/kubeletplugin/protocol/protos/*.proto)
	$(PY) hack/gen_protos.py
	touch $@

venv: $(VENV)/.protos

binaries:
	@mkdir -p build
	hack/build-binaries.sh $(call into,$(BIN_DIR_FILE))

# Only what `make demo`'s local cluster runs: a newcomer's first demo builds
# no node runtime and no Prometheus.
control-plane-binaries:
	@mkdir -p build
	BINARIES=control-plane hack/build-binaries.sh $(call into,$(BIN_DIR_FILE))

# Only what the unit tests run: promtool, for the chart's Prometheus rules and
# the generated Prometheus configurations; no Kubernetes build.
promtool:
	BINARIES=promtool hack/build-binaries.sh > /dev/null

# Kueue's manager and the CRDs and webhooks of its module, for `trainium-dra up
# --with-kueue` (docs/queues.md); `make binaries` builds it too.
kueue:
	hack/kueue/build.sh

# LeaderWorkerSet's manager and the CRD and webhooks of its module, for
# `trainium-dra up --with-lws` (docs/aws-neuron.md); `make binaries` builds it too.
lws:
	hack/lws/build.sh

# The Debian packages the real-node cluster calls (runc, iptables, ...), for the
# targets that start real nodes; `make demo` needs none of them.
node-packages:
	hack/node-packages.sh

# The Go reference kubelet plugin (sigs.k8s.io/dra-example-driver) that
# bench-node runs beside ours, built from its module into the cache.
dra-example-driver:
	@mkdir -p build
	hack/build-dra-example-driver.sh $(call into,$(GO_PLUGIN_FILE))

# The driver and sandbox (pause) images, built with buildah and no registry,
# exported as OCI archives into $(CACHE)/images (docs/images.md).
image:
	TRAINIUM_DRA_CACHE=$(CACHE) hack/images/build.sh

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Unit tests only: no control plane needed.
unit: venv promtool
	$(PY) -m pytest -m "not integration"

# The tests: set-up steps side by side, then three lanes side by side, each
# line they print led by the step's or lane's name (hack/lane.sh). On a cold
# machine the set-up is mostly Go builds, which leave a CPU idle while they
# link or wait on the network, and image and package downloads, which leave
# both idle: side by side they fill each other's gaps. Both releases are built
# here, so no lane builds while the others run tests. The lanes mostly wait on
# their clusters, so they share the two CPUs:
#   stand-in    every test but the real nodes' on the pinned release, in two
#               pytest workers; tests that share a cluster stay on one worker
#               (tests/conftest.py)
#   real-nodes  the real-node tests on the pinned release, then on K8S_PREVIOUS
#               (the host holds one real-node cluster at a time)
#   kind        kind's own tools (kind, kubeadm, kubectl), docs/kind.md end to
#               end on podman, then the examples on K8S_PREVIOUS
SET_UP_STEPS := lint binaries previous-binaries node-packages image
TEST_LANES := stand-in real-nodes kind
# Each step's and lane's output is also kept in build/lanes/; on a failure,
# what failed is printed again last (hack/lane-digest.sh).
test: venv
	@rm -rf build/lanes
	+$(MAKE) --no-print-directory -j$(words $(SET_UP_STEPS)) $(addprefix set-up-,$(SET_UP_STEPS)) \
	  || { hack/lane-digest.sh; exit 2; }
	+$(MAKE) --no-print-directory -j3 $(addprefix lane-,$(TEST_LANES)) || { hack/lane-digest.sh; exit 2; }

set-up-%:
	+hack/lane.sh set-up $* $(MAKE) --no-print-directory $*

lane-%:
	+hack/lane.sh lane $* $(MAKE) --no-print-directory test-$*

test-stand-in: venv binaries image
	$(WITH_BINARIES) $(PY) -m pytest -n 2 --no-loadscope-reorder \
	  --ignore=tests/realnodes --ignore=tests/realnodes_aws --ignore=tests/countersfirst --ignore=tests/kind

test-real-nodes: venv binaries node-packages image
	$(WITH_BINARIES) $(PY) -m pytest tests/realnodes tests/realnodes_aws
	+$(MAKE) --no-print-directory test-previous-real-nodes

test-kind: kind-tools previous-binaries
	+$(MAKE) --no-print-directory kind-e2e
	+$(MAKE) --no-print-directory test-previous-examples

# The binaries of K8S_PREVIOUS, built once into their own cache directory
# (hack/build-binaries.sh builds one release at a time: a second lane asking
# for it waits for the first).
previous-binaries:
	@mkdir -p build
	K8S_VERSION=$(K8S_PREVIOUS) hack/build-binaries.sh $(call into,$(PREVIOUS_BIN_DIR_FILE))

# What can depend on the Kubernetes release, again on K8S_PREVIOUS: the example
# tests on the stand-in and the release table's check, then the real-node tests.
# Left out: real-node tests of our own recovery (a daemon killed, a rolling
# update, `down` and `status`), whose outcome no Kubernetes release changes,
# and the examples again under real kubelets (they run here on the stand-in);
# both run on the pinned release.
SAME_ON_EVERY_RELEASE := killed_during_prepares or rolling_update or down_leaves_nothing or status_and_top
WITH_PREVIOUS = TRAINIUM_DRA_BIN_DIR=$$(cat $(PREVIOUS_BIN_DIR_FILE)) K8S_VERSION=$(K8S_PREVIOUS)
test-previous: test-previous-examples test-previous-real-nodes

test-previous-examples: venv previous-binaries image
	$(WITH_PREVIOUS) $(PY) -m pytest tests/e2e/examples tests/localsim/test_k8srelease.py

test-previous-real-nodes: venv previous-binaries node-packages image
	$(WITH_PREVIOUS) $(PY) -m pytest tests/realnodes --ignore=tests/realnodes/test_examples.py \
	  -k "not ($(SAME_ON_EVERY_RELEASE))"

# The local cluster (one Trn3 Gen2 rack, 36 nodes) with a demo job; it keeps
# running. DEMO_ARGS takes `trainium-dra up` flags, e.g. DEMO_ARGS="--racks 2".
# LeaderWorkerSet is built when the flags start it: --with-lws, or --profile aws
# without --without-lws.
DEMO_LWS = $(if $(findstring --without-lws,$(DEMO_ARGS)),,$(or $(findstring --with-lws,$(DEMO_ARGS)),$(findstring --profile aws,$(DEMO_ARGS)),$(findstring --profile=aws,$(DEMO_ARGS))))
demo: venv $(if $(findstring --with-prometheus,$(DEMO_ARGS)),binaries,control-plane-binaries) $(if $(findstring --with-kueue,$(DEMO_ARGS)),kueue) $(if $(DEMO_LWS),lws)
	$(WITH_BINARIES) $(PY) -m localsim.commands.demo $(DEMO_ARGS)

# The same with real kubelets, containerd and the chart installed by helm
# (root; docs/real-nodes.md): one Trn3 Gen1 UltraServer, 4 real nodes.
demo-nodes: venv binaries node-packages image
	$(WITH_BINARIES) $(PY) -m localsim.commands.demo --real-nodes $(DEMO_ARGS)

demo-stop: venv
	$(VENV)/bin/trainium-dra down

# Every benchmark page (docs/benchmarks.md and bench-*.md, reliability.md, scale.md and its
# plots, simulator.md's tables) from benchmarks/results/*.json alone. Each
# benchmark below refuses a machine whose load exceeds its CPUs unless
# BENCH_ARGS=--noisy (CHAOS_ARGS=--noisy for chaos), which marks its section.
pages: venv
	$(PY) -m benchmarks.render

bench-sim: venv
	$(PY) -m benchmarks.sim $(BENCH_ARGS)

# Every validation case of the simulated core; writes the tables of
# docs/simulator.md and benchmarks/results/sim-validation.json.
validate-sim: venv
	$(PY) -m benchmarks.sim_validation

# The collectives model's fabric, algorithms and busbw tables (computed, not
# timed): benchmarks/results/sim-collectives.json and docs/simulator.md.
sim-collectives: venv
	$(PY) -m benchmarks.sim_collectives

bench-controller: venv binaries
	$(WITH_BINARIES) $(PY) -m benchmarks.controller $(BENCH_ARGS)

# The scheduler at 1, 4 and 16 racks, smallest fleet first, a line per step
# (point n of m, what it does, time so far): sized to end within an hour on 2
# CPUs and 24 GiB; 100 racks is a run of its own (BENCH_ARGS='--scheduler-racks
# 100'). With bench-controller's publishing figures, fitted and projected to a
# million chips: docs/scale.md and its plots.
bench-scale: venv binaries
	$(WITH_BINARIES) $(PY) -m benchmarks.scale --measure-scheduler $(BENCH_ARGS)

# A job trace replayed on simulated racks by the offline anchor (docs/whatif.md);
# WHATIF_ARGS takes `trainium-dra whatif offline` flags.
whatif: venv
	$(VENV)/bin/trainium-dra whatif offline $(WHATIF_ARGS)

# The same through the real scheduler: a local cluster of WHATIF_RACKS Gen2 racks
# (node pools; WHATIF_UP_ARGS adds `trainium-dra up` flags) up in a state
# directory of its own, the replay, that cluster down again. A cluster of
# `make demo` keeps running untouched beside it.
WHATIF_RACKS ?= 1
WHATIF_UP_ARGS ?=
WHATIF_STATE ?= $(HOME)/.local/state/trainium-dra/whatif-live
whatif-live: venv binaries
	$(WITH_BINARIES) $(VENV)/bin/trainium-dra up --state-dir=$(WHATIF_STATE) --racks $(WHATIF_RACKS) --pools node $(WHATIF_UP_ARGS)
	$(WITH_BINARIES) $(VENV)/bin/trainium-dra whatif live --state-dir=$(WHATIF_STATE) $(or $(WHATIF_ARGS),--jobs 300); \
	  status=$$?; $(VENV)/bin/trainium-dra down --state-dir=$(WHATIF_STATE); exit $$status

# The example of docs/bench-whatif.md: one trace, both placement rules, gangs on and off.
bench-whatif: venv
	$(PY) -m benchmarks.whatif

# The live replays of docs/bench-whatif.md, each on a cluster of its own; BENCH_ARGS
# takes --cases NAME,... (benchmarks/whatif_live.py lists them) and --noisy.
bench-whatif-live: venv binaries
	$(WITH_BINARIES) $(PY) -m benchmarks.whatif_live $(BENCH_ARGS)

# The UltraServer operator's failure strategies on the stand-in: seconds from a
# failed chip to Degraded, to the strategy's act and to every pod Running again
# (docs/aws-neuron.md).
bench-usoperator: venv binaries
	$(WITH_BINARIES) $(PY) -m benchmarks.usoperator $(BENCH_ARGS)

# The operator at fleet scale: 100 Trn3 Gen1 UltraServers, 50 workloads allocated
# and then released (docs/aws-neuron.md, "Scale"); a trial on a busy machine:
# BENCH_ARGS='--noisy --out FILE', which leaves results and pages alone.
bench-usoperator-scale: venv binaries
	$(WITH_BINARIES) $(PY) -m benchmarks.usoperator_scale $(BENCH_ARGS)

# What one rack's slices take inside etcd, per pool layout and partition sizes.
bench-storage: venv binaries
	$(WITH_BINARIES) $(PY) -m benchmarks.storage $(BENCH_ARGS)

# The real kube-scheduler on our layouts, per-node pools and upstream's
# scheduler_perf shape; device orders; random-mix packing; busy fleets (the
# occupancy step alone: BENCH_ARGS='--steps occupancy'; 100 racks apart:
# BENCH_ARGS="--steps occupancy --busy-racks 100 --busy-layouts ..."; the node
# pools on the counters-first scheduler too: --scheduler counters-first; a trial
# on a busy machine: --noisy --out FILE, which leaves results and pages alone).
# The occupancy step prints a line before each run (run n of m, fleet, layout).
bench-scheduler: venv binaries
	$(WITH_BINARIES) $(PY) -m benchmarks.scheduler $(BENCH_ARGS)

# A kube-scheduler whose allocator checks counters before CEL selectors
# (hack/k8s-counters-first; docs/scale.md, "Counters before selectors"), built
# once into the cache; prints its path. Opt-in: no cluster of `make demo` or
# `make test` runs it. BENCH_ARGS='--steps occupancy --scheduler counters-first'
# measures it beside the stock one.
scheduler-counters-first:
	@hack/k8s-counters-first/build.sh

# Its exactness, apart from `make test` (it costs one more kube-scheduler
# build): upstream's allocator tests on the patched module, then the same busy
# rack scheduled by the stock and the patched scheduler, claim by claim.
test-counters-first: venv binaries scheduler-counters-first
	cd $$(dirname $$(hack/k8s-counters-first/build.sh))/dynamic-resource-allocation && go test ./structured/...
	$(WITH_BINARIES) $(PY) -m pytest tests/countersfirst

# A thousand races of rack, server and core claims against the real scheduler
# on the node pool layout's guard (docs/device-model.md, "Pool layouts"); the
# suite runs one round of the same test. Prints the wins per claim shape.
guard-races: venv binaries
	$(WITH_BINARIES) TRAINIUM_DRA_GUARD_ROUNDS=42 $(PY) -m pytest --timeout=3600 -rP tests/controller/test_rack_guard.py

bench-node: venv binaries dra-example-driver
	$(WITH_BINARIES) TRAINIUM_DRA_GO_PLUGIN=$$(cat $(GO_PLUGIN_FILE)) $(PY) -m benchmarks.node $(BENCH_ARGS)

# Real nodes (root): the kubelet's own DRA latency histograms, memory and CPU per node.
bench-realnodes: venv binaries node-packages image dra-example-driver
	$(WITH_BINARIES) TRAINIUM_DRA_GO_PLUGIN=$$(cat $(GO_PLUGIN_FILE)) $(PY) -m benchmarks.realnodes $(BENCH_ARGS)

# A whole Gen2 rack on 36 real nodes (root, about half an hour): start-up, memory
# and CPU per node, the whole-rack gang, then a fill of single-core pods.
bench-realrack: venv binaries node-packages image
	$(WITH_BINARIES) $(PY) -m benchmarks.realrack $(BENCH_ARGS)

# Faults, load and hostile input at full size (about an hour); writes
# docs/reliability.md and benchmarks/results/chaos.json. CHAOS_ARGS takes
# `python -m benchmarks.chaos` flags, e.g. CHAOS_ARGS="--only fuzz".
chaos: venv binaries node-packages image
	$(WITH_BINARIES) $(PY) -m benchmarks.chaos $(CHAOS_ARGS)

# A newcomer's first `make demo` (root: it creates a user whose home has a long
# path, empty caches, a clone of HEAD), timed into the README.
bench-first-demo: venv
	$(PY) -m benchmarks.first_demo $(BENCH_ARGS)

# A newcomer's first `make test` (root, as CI): `.ci/run` in a clone of HEAD in
# a temporary directory, on this machine's caches as they are (the results
# say warm or cold), timed into the README with its memory and disk.
bench-first-test: venv
	$(PY) -m benchmarks.first_test $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# --- kind path (docs/kind.md) ---
# kind, kubeadm, kubectl and helm are built from their Go modules; the node
# image is built here too (hack/kind/node-image.sh). The container engine is
# docker when installed, else podman (as root), configured by the project.
KIND ?= kind
KIND_CLUSTER ?= trainium-dra
KIND_NODE_IMAGE ?=
KUBECTL ?= kubectl
HELM ?= helm
IMAGE_REPO ?= localhost/trainium-dra/driver
IMAGE_TAG ?= dev
KIND_DEMO ?= deploy/kind/demo.yaml
KIND_DEMO_NAMESPACE ?= kind-demo
KIND_CONTEXT = kind-$(KIND_CLUSTER)
KIND_PROVIDER ?= $(shell hack/kind/provider.sh)
KIND_BIN_DIR_FILE := build/kind-bin-dir
KIND_NODE_IMAGE_FILE := build/kind-node-image
# Our kind, kubectl and helm first on PATH; podman configured by hack/kind/containers.conf.
KIND_ENV = PATH=$$(cat $(KIND_BIN_DIR_FILE)):$$PATH KIND_EXPERIMENTAL_PROVIDER=$(KIND_PROVIDER) \
  CONTAINERS_CONF=$(CURDIR)/hack/kind/containers.conf KIND_PROVIDER=$(KIND_PROVIDER) KIND=$(KIND) KUBECTL=$(KUBECTL) HELM=$(HELM)

.PHONY: docker-image kind-tools kind-node-image kind-up kind-load kind-install kind-demo kind-kueue kind-aws kind-lws kind-down kind-e2e

# The driver image with docker, for a registry or engine of your own
# (`make image` builds the same image with buildah; kind-load uses that one).
docker-image:
	docker build -t $(IMAGE_REPO):$(IMAGE_TAG) .

kind-tools: binaries
	hack/kind/build-tools.sh $(call into,$(KIND_BIN_DIR_FILE))

kind-node-image: kind-tools image
	$(KIND_ENV) hack/kind/node-image.sh $(call into,$(KIND_NODE_IMAGE_FILE))

# kind mounts /lib/modules into the node; some kernels (containers) have none.
# kind's --wait covers the control plane; the workers are waited for after.
kind-up: $(if $(KIND_NODE_IMAGE),kind-tools,kind-node-image)
	test -d /lib/modules || mkdir -p /lib/modules
	$(KIND_ENV) $(KIND) create cluster --name $(KIND_CLUSTER) --config deploy/kind/cluster.yaml \
	  --image $(or $(KIND_NODE_IMAGE),$$(cat $(KIND_NODE_IMAGE_FILE))) --wait 5m
	$(KIND_ENV) $(KUBECTL) --context $(KIND_CONTEXT) wait nodes --all --for=condition=Ready --timeout=5m

# The driver image of `make image` (an OCI archive, no registry), into every
# node, named $(IMAGE_REPO):$(IMAGE_TAG) there.
kind-load: kind-tools image
	$(KIND_ENV) hack/kind/load.sh $(KIND_CLUSTER) $(IMAGE_REPO):$(IMAGE_TAG)

# The chart with deploy/values/kind.yaml (hack/kind/install.sh: helm upgrade
# --install, until its pods are ready and every node publishes devices).
kind-install: kind-tools
	$(KIND_ENV) IMAGE_REPO=$(IMAGE_REPO) IMAGE_TAG=$(IMAGE_TAG) hack/kind/install.sh $(KIND_CLUSTER)

# The same release switched to the AWS profile (docs/kind.md): kind.yaml, then
# deploy/values/kind-aws.yaml; `make kind-install` switches it back.
kind-aws: kind-tools
	$(KIND_ENV) IMAGE_REPO=$(IMAGE_REPO) IMAGE_TAG=$(IMAGE_TAG) hack/kind/install.sh $(KIND_CLUSTER) deploy/values/kind-aws.yaml

kind-demo: kind-tools
	$(KIND_ENV) $(KUBECTL) --context $(KIND_CONTEXT) apply -f $(KIND_DEMO)
	$(KIND_ENV) $(KUBECTL) --context $(KIND_CONTEXT) -n $(KIND_DEMO_NAMESPACE) wait pod --all --for=condition=PodScheduled --timeout=300s
	$(KIND_ENV) $(KUBECTL) --context $(KIND_CONTEXT) -n $(KIND_DEMO_NAMESPACE) get resourceclaims -o jsonpath='{range .items[*]}{.metadata.name}{":"}{range .status.allocation.devices.results[*]} {.pool}/{.device}{end}{"\n"}{end}'
	$(KIND_ENV) $(KUBECTL) --context $(KIND_CONTEXT) -n $(KIND_DEMO_NAMESPACE) get pods -o wide

# Kueue from its own chart, with its manager's image built here (docs/kind.md).
kind-kueue: kind-tools venv
	$(KIND_ENV) hack/kind/kueue.sh $(KIND_CLUSTER)

# LeaderWorkerSet from its own chart, with its manager's image built here (docs/kind.md).
kind-lws: kind-tools
	$(KIND_ENV) hack/kind/lws.sh $(KIND_CLUSTER)

kind-down: kind-tools
	$(KIND_ENV) hack/kind/down.sh $(KIND_CLUSTER)

# The whole of docs/kind.md on this machine, checked, then deleted; non-zero
# on any failure, and the cluster is deleted either way.
# `+`: e2e.sh runs make for each step, which then shares this make's jobs.
kind-e2e: kind-tools venv
	+$(KIND_ENV) hack/kind/e2e.sh
