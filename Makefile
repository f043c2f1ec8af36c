# rdmabench: the README's commands. `make run` and `make test` install what is missing
# (Debian packages when root, Python packages into .venv), build, then run or test.
SHELL := /bin/bash
BUILD ?= build
VENV ?= .venv
DEBS := cmake ninja-build g++ pkg-config libfabric-dev libfabric-bin libcli11-dev nlohmann-json3-dev \
        libfmt-dev libgtest-dev iproute2 libtomlplusplus-dev libucx-dev \
        libibverbs-dev librdmacm-dev ibverbs-providers ibverbs-utils rdmacm-utils perftest qperf libpci3 ucx-utils help2man lintian libopenmpi-dev openmpi-bin libpmix-dev libssl-dev \
        iperf3 sockperf
RUN_FLAGS ?= -t ofi:shm --op write,send --mode bw,lat --size 64,4K,1M
REPORT_JOB ?= jobs/report-default.toml

.PHONY: all deps venv nvrtc build run test layers minimal unit kernel e2e pytest compare report fuzz fuzz-short clean deb

all: build

deps:
	@missing=""; for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing Debian packages; run: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

venv: $(VENV)/.stamp
$(VENV)/.stamp: python/pyproject.toml $(shell find python/rdmabench_report -name '*.py' 2>/dev/null)
	@[ -x $(VENV)/bin/python ] || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip >/dev/null
	$(VENV)/bin/pip install -q pytest matplotlib ./python
	@touch $@

# NVRTC (CUDA's runtime compiler, a shared library from PyPI; no GPU needed) for `make kernel`.
# The cu12 build: its CUBINs load on any CUDA 12 driver (its PTX wants 12.9 or later).
NVRTC_WHEEL ?= nvidia-cuda-nvrtc-cu12==12.9.86
nvrtc: $(VENV)/.nvrtc-stamp
$(VENV)/.nvrtc-stamp: $(VENV)/.stamp
	$(VENV)/bin/pip install -q $(NVRTC_WHEEL)
	@touch $@

# The file-API query goes in first, so the configure writes the target graph tests/layers reads.
build: deps
	@mkdir -p $(BUILD)/.cmake/api/v1/query && touch $(BUILD)/.cmake/api/v1/query/codemodel-v2
	@[ -f $(BUILD)/build.ninja ] || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
	ninja -C $(BUILD)

run: build
	$(BUILD)/rdmabench $(RUN_FLAGS)

unit: build
	cd $(BUILD) && ctest --output-on-failure

# dma:cuda -o engine=sm's kernel compiled by NVRTC to PTX and a CUBIN for the H100 (sm_90), and
# bench's GPU pause probe: any compile error fails, and so does a missing NVRTC (plain ctest skips
# the first instead).
kernel: build nvrtc
	$(BUILD)/sm_kernel_compile --require --venv $(abspath $(VENV))
	$(BUILD)/gpu_pause_floor --compile sm_90 --venv $(abspath $(VENV))

# The two suites have their own conftest.py, so each gets its own pytest run.
pytest: build venv
	RDMABENCH=$(abspath $(BUILD))/rdmabench $(VENV)/bin/pytest -q tests/e2e
	$(VENV)/bin/pytest -q python/tests

test: layers unit kernel pytest minimal fuzz-short

# The layers as the build declares them: no upward include, no link cycle, no function over 80
# lines, and docs/architecture.md's dependency picture is the build's (tests/layers/).
layers: build
	@[ -d $(BUILD)/.cmake/api/v1/reply ] || cmake -S . -B $(BUILD) >/dev/null
	python3 tests/layers/check_layers.py $(BUILD)

# Debian packages of this build (rdmabench, vrdma, vrdma-dev) in $(BUILD)/packages: cpack over the
# same install rules, prefix /usr, config in /etc (cmake/package.cmake).
deb: build
	$(if $(DEB_MAINTAINER),cmake -S . -B $(BUILD) -DRB_DEB_MAINTAINER="$(DEB_MAINTAINER)" >/dev/null,)
	cpack --config $(BUILD)/CPackConfig.cmake -G DEB -B $(BUILD)/packages

# The same sources built without any optional library, as a cluster without UCX or a laptop
# without libfabric would build them, and what that build must still do.
MINIMAL_BUILD ?= build-minimal
MINIMAL_WITHOUT := libfabric;ucx;pmix;mpi;libibverbs
minimal: deps
	@[ -f $(MINIMAL_BUILD)/build.ninja ] || cmake -S . -B $(MINIMAL_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DRDMABENCH_TESTS=OFF "-DRDMABENCH_WITHOUT=$(MINIMAL_WITHOUT)"
	ninja -C $(MINIMAL_BUILD) rdmabench vrdmad vrdmactl
	tests/layers/minimal_build.sh $(MINIMAL_BUILD)

# A short run of the fuzzer (the same target as `make fuzz`), so every test run tries it.
fuzz-short:
	$(MAKE) fuzz FUZZ_SECONDS=30

# libFuzzer over vrdma's control packets, the routers' link packets and peer-laid-out QP memory, FUZZ_SECONDS long, under
# AddressSanitizer and UndefinedBehaviorSanitizer; its corpus stays in build-fuzz/corpus.
FUZZ_SECONDS ?= 180
FUZZ_DEBS := clang
fuzz: deps
	@missing=""; for p in $(FUZZ_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing Debian packages; run: sudo apt-get install -y$$missing"; exit 1; fi; \
	fi
	@[ -f build-fuzz/build.ninja ] || cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRDMABENCH_FUZZ=ON -DRDMABENCH_TESTS=OFF
	ninja -C build-fuzz vrdma_fuzz
	python3 tests/fuzz/make_seeds.py build-fuzz/corpus
	build-fuzz/vrdma_fuzz -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 build-fuzz/corpus

# Peer tools for the side-by-side runs: installed only for `make compare`.
COMPARE_DEBS := libfabric-bin iperf3 sockperf ucx-utils
compare: build
	@missing=""; for p in $(COMPARE_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing Debian packages; run: sudo apt-get install -y$$missing"; exit 1; fi; \
	fi
	bench/compare.sh $(BUILD)/rdmabench
	bench/compare_tcp.sh $(BUILD)/rdmabench
	bench/batch_lazy_rails.sh $(BUILD)/rdmabench
	bench/event_vs_poll.sh $(BUILD)/rdmabench
	bench/ucx_vs_perftest.sh $(BUILD)/rdmabench
	python3 bench/vrdma_table.py $(BUILD)
	python3 bench/verbs_vs_rdmabench.py $(BUILD)
	python3 bench/verbs_two_hosts.py $(BUILD)
	python3 bench/floors.py $(BUILD)
	python3 bench/floors.py --loaded $(BUILD)

# A job on loopback (or the job's --addr), then plots, summary and comparison in report/README.md.
# Every file the report writes is removed first, so nothing of an earlier report is left over.
report: build venv
	@mkdir -p report && rm -rf report/results.jsonl report/tables.txt report/*.png report/README.md report/by-transport
	set -o pipefail; $(BUILD)/rdmabench --job $(REPORT_JOB) --json report/results.jsonl | tee report/tables.txt
	set -o pipefail; $(VENV)/bin/rdmabench-report plot report/results.jsonl -o report/ | tee report/.pngs
	$(VENV)/bin/rdmabench-report readme report $(REPORT_JOB) $$(cat report/.pngs)
	@rm -f report/.pngs

clean:
	rm -rf $(BUILD) $(MINIMAL_BUILD) build-fuzz $(VENV)
