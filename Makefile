# `make test` and `make demo` do all set-up themselves on a fresh clone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed
# A CPU build of torch where the machine has one on disk (the default PyPI wheel is a large CUDA build).
TORCH_SPEC := $(shell ls /opt/wheels/torch-2.13.0*cpu*.whl >/dev/null 2>&1 && echo 'torch==2.13.0' || echo 'torch>=2.2')

PY_SOURCES := privsyn_fed tests examples benchmarks

.PHONY: install lint test demo bench bench-aim bench-federated bench-mpc bench-netem bench-small clean

install: $(STAMP)

# Everything: the package with its extras dev (tests, linters), mpc (torch, onnx, omegaconf), agent
# (Flower), engines (DuckDB, psycopg) and spark (pyspark), then CrypTen. CrypTen comes last and with --no-deps: its
# metadata requires the retired `sklearn` package (and torchvision and tensorboard, which secure computation does not use), so pip
# would report those as broken requirements after any later step; for the same reason, on a re-run
# (CrypTen already there) the package's step does not list them (--no-warn-conflicts).
$(STAMP): pyproject.toml Makefile
	@echo "make install: creating the virtual environment $(VENV) ..."
	$(PYTHON) -m venv $(VENV)
	@echo "make install: upgrading pip ..."
	$(PIP) install --quiet --upgrade pip
	@echo "make install: installing $(TORCH_SPEC) (a CPU build where /opt/wheels has one) ..."
	$(PIP) install --progress-bar on '$(TORCH_SPEC)'
	@echo "make install: installing privsyn-fed (editable) with the extras dev, mpc, agent, engines and spark ..."
	$(PIP) install --progress-bar on --no-warn-conflicts -e '.[dev,mpc,agent,engines,spark]'
	@echo "make install: installing crypten==0.4.1 without its declared dependencies ..."
	$(PIP) install --quiet --no-deps 'crypten==0.4.1'
	touch $(STAMP)
	@echo "make install: done; run the tests with: make test"

# Style (ruff: lint and format), types (mypy on privsyn_fed/) and the docs (mkdocs, warnings as errors),
# then the tests.
lint: $(STAMP)
	$(PY) -m ruff check $(PY_SOURCES)
	$(PY) -m ruff format --check $(PY_SOURCES)
	$(PY) -m mypy
	$(PY) -m mkdocs build --strict --quiet --site-dir $(VENV)/site

# The tests run in one worker per core (pytest-xdist), each test file in one worker.
test: lint
	$(PY) -m pytest -q -n auto --dist loadfile

demo: $(STAMP)
	$(PY) -m privsyn_fed.demo

# One table: every method's wall time, peak memory and workload error on Adult, CPS1988 and a
# 6,500-row, 10-column table; `make bench SMARTNOISE=PYTHON` adds smartnoise-synth's AIM (PYTHON
# is the python of a virtual environment with smartnoise-synth) and our AIM's ratios to it.
bench: $(STAMP)
	$(PY) benchmarks/speed.py $(if $(SMARTNOISE),--smartnoise $(SMARTNOISE))

# Silo marginal counting, and AIM on Adult against smartnoise-synth (repeated runs).
bench-aim: $(STAMP)
	$(PY) benchmarks/marginals_adult.py
	$(PY) benchmarks/aim_adult.py

# The FLAIM paper's Adult results (Table 2 and the label-skew sweep); about 1.5 hours on 2 cores.
bench-mpc: $(STAMP)
	$(PY) benchmarks/mpc_adult.py run --rounds 10
	$(PY) benchmarks/mpc_adult.py report | tee benchmarks/out/mpc_adult.md

# bench-mpc's MPC run with every party and the dealer in a network namespace of its own, behind one-way
# delays of 0 (loopback), 10 and 50 ms made by `tc netem`, or where the kernel has no netem by a userspace
# relay between TUN devices. Needs root (else one line, skipped).
bench-netem: $(STAMP)
	$(PY) benchmarks/mpc_netem.py run --rounds 10
	$(PY) benchmarks/mpc_netem.py report | tee benchmarks/out/mpc_netem.md

# Every method against the independent method from 1,000 rows to full tables; about 2.5 hours on 2 cores.
bench-small: $(STAMP)
	$(PY) benchmarks/small_tables.py run
	$(PY) benchmarks/small_tables.py report | tee benchmarks/out/small_tables.md

bench-federated: $(STAMP)
	$(PY) benchmarks/flaim_adult.py table --seeds 3
	$(PY) benchmarks/flaim_adult.py sweep --seeds 3
	$(PY) benchmarks/flaim_adult.py report | tee benchmarks/out/flaim_adult.md

clean:
	rm -rf $(VENV) demo-out .pytest_cache
