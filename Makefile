# Every target sets up what it needs: a virtualenv from uv.lock and the
# upstream control-plane binaries, cached outside the repo.
CACHE ?= $(HOME)/.cache/trainium-dra
UV_VERSION := 0.13.8
UV := $(CACHE)/uv-$(UV_VERSION)/bin/uv
VENV := .venv
PY := $(VENV)/bin/python
BIN_DIR_FILE := build/bin-dir
WITH_BINARIES = TRAINIUM_DRA_BIN_DIR=$$(cat $(BIN_DIR_FILE))

.PHONY: venv binaries image test lint unit demo demo-nodes demo-stop bench-sim bench-controller bench-scheduler bench-node bench-realnodes validate-sim clean

$(UV):
	python3 -m venv $(CACHE)/uv-$(UV_VERSION)
	$(CACHE)/uv-$(UV_VERSION)/bin/pip install --quiet uv==$(UV_VERSION)

$(VENV)/.synced: pyproject.toml uv.lock | $(UV)
	UV_PROJECT_ENVIRONMENT=$(VENV) $(UV) sync --frozen --quiet
	touch $@

# The kubelet gRPC message modules are generated from our .proto files, never committed.
$(VENV)/.protos: $(VENV)/.synced $(wildcard driver/plugin/kubeletapi/protos/*.proto)
	$(PY) hack/gen_protos.py
	touch $@

venv: $(VENV)/.protos

binaries:
	@mkdir -p build
	hack/build-binaries.sh > $(BIN_DIR_FILE)

# The driver and sandbox (pause) images, built with buildah and no registry,
# exported as OCI archives into $(CACHE)/images (docs/images.md).
image:
	TRAINIUM_DRA_CACHE=$(CACHE) hack/images/build.sh

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Unit tests only: no control plane needed.
unit: venv
	$(PY) -m pytest -m "not integration"

test: venv lint binaries image
	$(WITH_BINARIES) $(PY) -m pytest

# The local cluster (one Trn3 Gen2 rack, 36 nodes) with a demo job; it keeps
# running. DEMO_ARGS takes `trainium-dra up` flags, e.g. DEMO_ARGS="--racks 2".
demo: venv binaries
	$(WITH_BINARIES) $(PY) -m driver.localsim.demo $(DEMO_ARGS)

# The same with real kubelets, containerd and the chart installed by helm
# (root; docs/real-nodes.md): one Trn3 Gen1 UltraServer, 4 real nodes.
demo-nodes: venv binaries image
	$(WITH_BINARIES) $(PY) -m driver.localsim.demo --real-nodes $(DEMO_ARGS)

demo-stop: venv
	$(VENV)/bin/trainium-dra down

bench-sim: venv
	$(PY) -m benchmarks.sim

# Every validation case of the simulated core; writes the tables of
# docs/simulator.md and benchmarks/results/sim-validation.json.
validate-sim: venv
	$(PY) -m benchmarks.sim_validation

bench-controller: venv binaries
	$(WITH_BINARIES) $(PY) -m benchmarks.controller

# The real kube-scheduler on our layouts, per-node pools and upstream's
# scheduler_perf shape; device orders; random-mix packing.
bench-scheduler: venv binaries
	$(WITH_BINARIES) $(PY) -m benchmarks.scheduler $(BENCH_ARGS)

bench-node: venv binaries
	$(WITH_BINARIES) $(PY) -m benchmarks.node

# Real nodes (root): the kubelet's own DRA latency histograms, memory and CPU per node.
bench-realnodes: venv binaries image
	$(WITH_BINARIES) $(PY) -m benchmarks.realnodes $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# --- kind path (docs/kind.md): needs docker, kind, kubectl and helm on PATH ---
KIND ?= kind
KIND_CLUSTER ?= trainium-dra
KIND_NODE_IMAGE ?=
KUBECTL ?= kubectl
HELM ?= helm
IMAGE_REPO ?= trainium-dra
IMAGE_TAG ?= dev
KIND_DEMO ?= deploy/kind/demo.yaml
KIND_DEMO_NAMESPACE ?= kind-demo
KIND_CONTEXT = kind-$(KIND_CLUSTER)

.PHONY: docker-image kind-up kind-load kind-install kind-demo

# kind's nodes take images from docker (`make image` needs no docker).
docker-image:
	docker build -t $(IMAGE_REPO):$(IMAGE_TAG) .

kind-up:
	$(KIND) create cluster --name $(KIND_CLUSTER) --config deploy/kind/cluster.yaml $(if $(KIND_NODE_IMAGE),--image $(KIND_NODE_IMAGE))

kind-load: docker-image
	$(KIND) load docker-image $(IMAGE_REPO):$(IMAGE_TAG) --name $(KIND_CLUSTER)

kind-install:
	$(HELM) upgrade --install trainium-dra charts/trainium-dra --kube-context $(KIND_CONTEXT) \
	  --namespace trainium-dra --create-namespace --values deploy/values/kind.yaml \
	  --set image.repository=$(IMAGE_REPO) --set image.tag=$(IMAGE_TAG) --wait --timeout 5m
	$(KUBECTL) --context $(KIND_CONTEXT) get ultraservers

kind-demo:
	$(KUBECTL) --context $(KIND_CONTEXT) apply -f $(KIND_DEMO)
	$(KUBECTL) --context $(KIND_CONTEXT) -n $(KIND_DEMO_NAMESPACE) wait pod --all --for=condition=PodScheduled --timeout=120s
	$(KUBECTL) --context $(KIND_CONTEXT) -n $(KIND_DEMO_NAMESPACE) get resourceclaims -o jsonpath='{range .items[*]}{.metadata.name}{":"}{range .status.allocation.devices.results[*]} {.pool}/{.device}{end}{"\n"}{end}'
	$(KUBECTL) --context $(KIND_CONTEXT) -n $(KIND_DEMO_NAMESPACE) get pods -o wide
