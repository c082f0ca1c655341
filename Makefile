# The README's two commands: `make run` (the local workflow run) and `make test`.
# Every target installs what is missing first, so both work on a fresh machine.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CHECKOV_VENV := $(VENV)/checkov
NODE_BIN := node_modules/.bin
# jsii and the local state-machine interpreter run on the Node 22 that package.json pins.
export JSII_NODE := $(CURDIR)/$(NODE_BIN)/node
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/$(NODE_BIN):$(PATH)
CDK := $(NODE_BIN)/cdk
STAGE ?= dev

.PHONY: run test synth diff deploy destroy lint estimate wheelhouse bench install clean

# VERBOSE=1: the jobs' library logging too. FAULTS=throttle,failed-job,lost-endpoint: AWS's errors injected.
run: install ## The main job: synthesize and run the workflow locally
	$(PY) -m local.run --stage $(STAGE) $(if $(INPUT),--input $(INPUT)) $(if $(VERBOSE),--verbose) \
		$(if $(FAULTS),--inject-faults $(FAULTS))

test: install ## The whole test suite
	$(PY) -m pytest -q

synth: install ## Templates in cdk.out/ (no AWS credentials needed)
	$(CDK) synth -q -c stage=$(STAGE)

diff: install
	$(PY) -m cli check --stage $(STAGE)
	$(CDK) diff -c stage=$(STAGE)

deploy: install
	$(PY) -m cli check --stage $(STAGE)
	$(CDK) deploy -c stage=$(STAGE)

destroy: install
	$(PY) -m cli check --stage $(STAGE)
	$(CDK) destroy -c stage=$(STAGE)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

estimate: install ## Memory, time and cost of a training run (ARGS="--preset ... --instance-type ...")
	$(PY) -m infra.estimate $(ARGS)

# Wheels of training/requirements.txt for the job containers (Python 3.12, x86_64), shipped in the
# training package so that jobs in isolated stages install without PyPI. Needs PyPI here, once.
wheelhouse: install
	rm -rf training/wheels
	$(PY) -m pip download -q --only-binary=:all: --implementation cp --python-version 3.12 \
		--platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
		-r training/requirements.txt -d training/wheels

bench: install ## Benchmarks (ratios against a reference measured in the same run)
	$(VENV)/bin/pip install -q --no-deps -r bench/requirements.txt
	for b in bench/*_bench.py; do $(PY) $$b || exit 1; done

install: $(VENV)/.installed $(CHECKOV_VENV)/.installed node_modules/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-nodeps.txt training/requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps -r requirements-nodeps.txt
	touch $@

# checkov in its own environment: its pins conflict with requirements.txt's (see requirements-checkov.txt).
$(CHECKOV_VENV)/.installed: requirements-checkov.txt | $(VENV)/.installed
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install -q --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install -q -r requirements-checkov.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

clean:
	rm -rf cdk.out build runs
