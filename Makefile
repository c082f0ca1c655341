# The README's two commands: `make run` (the local workflow run) and `make test`.
# Every target installs what is missing first, so both work on a fresh machine.

# The variables a user sets are the #: lines under help. PYTHON's .venv records it in .venv/.built-with.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CHECKOV_VENV := $(VENV)/checkov
HF_VENV := .venv-hf
JAX_VENV := .venv-jax
NODE_BIN := node_modules/.bin
# jsii and the local state-machine interpreter run on the Node 22 that package.json pins.
export JSII_NODE := $(CURDIR)/$(NODE_BIN)/node
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/$(NODE_BIN):$(PATH)
CDK := $(NODE_BIN)/cdk
STAGE ?= dev
CDK_CONTEXT = -c stage=$(STAGE) $(if $(CONFIG),-c config=$(abspath $(CONFIG)))

.DEFAULT_GOAL := help
.PHONY: help run test platforms hf-check synth diff deploy destroy lint estimate wheelhouse bench install clean

help: ## This list, and the variables that change what a target does
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "  variables:"
	@awk 'BEGIN {FS = "#: "} /^#: / {print "    " $$2}' $(MAKEFILE_LIST)
	@echo "  then: $(PY) -m cli validate|start --wait|status|stop|outputs|upload|generate --help"

#: STAGE=dev|prod         the stage in cdk.json (every target)
#: CONFIG=file.json       stage overrides for synth, diff, deploy and estimate (cdk's -c config=)
#: INPUT=input.json       run: execution input over local/default-input.json
#: CORPUS=path            run: a corpus file or folder of your own instead of the sample (docs/run-locally.md)
#: VERBOSE=1              run: the jobs' library logging on the console too
#: FAULTS=throttle,failed-job,lost-endpoint,missing-quota   run: AWS's errors injected (local/faults.py)
#: PYTHON=python3.12      the interpreter .venv is built with (3.11 to 3.13); naming another rebuilds .venv
#: ARCHIVE=model.tar.gz   hf-check: a job's model archive instead of a model made here
#: ARGS="--preset ..."    estimate: options over the stage's
#: STOP=1                 destroy: stop the stage's running executions and jobs first (else it refuses)

LOCAL_RUN_ARGS = --stage $(STAGE)$(if $(INPUT), --input $(INPUT))$(if $(CORPUS), --corpus $(abspath $(CORPUS)))$\
	$(if $(VERBOSE), --verbose)$(if $(FAULTS), --inject-faults $(FAULTS))
run: install ## The main job: synthesize and run the workflow locally
	$(PY) -m local.run $(LOCAL_RUN_ARGS)

test: install ## The whole test suite
	$(PY) -m pytest -q

platforms: install ## Every pin has wheels for Linux x86_64 and aarch64 and macOS arm64 (asks PyPI; CI runs it)
	$(PY) -m tests.platforms

# transformers' own GPT2LMHeadModel and AutoTokenizer load the Hugging Face export (training/export/hugging_face.py) of
# a bf16, pipelined model made here, or of a job's model.tar.gz (ARCHIVE=runs/s3/.../model.tar.gz), and give the
# project's logits (within 1e-4) and token ids. transformers and torch get an environment of their own.
# The Llama family both ways (training/export/llama_hf.py): LlamaForCausalLM reads our exports, our import reads
# tiny random checkpoints transformers saves, with equal logits, and a round trip ours -> HF -> ours is exact.
hf-check: install $(HF_VENV)/.installed ## The Hugging Face export read by transformers (ARCHIVE=model.tar.gz: a job's)
	$(PY) tests/hf/reference.py build/hf-check $(if $(ARCHIVE),--archive $(ARCHIVE))
	$(HF_VENV)/bin/python tests/hf/check.py build/hf-check
	$(PY) tests/hf/llama_reference.py build/hf-check-llama export
	$(HF_VENV)/bin/python tests/hf/llama_check.py build/hf-check-llama
	$(PY) tests/hf/llama_reference.py build/hf-check-llama import

synth: install ## Templates in cdk.out/ (no AWS credentials needed)
	$(CDK) synth -q $(CDK_CONTEXT)

diff: install ## What a deploy would change in your account
	$(PY) -m cli check --stage $(STAGE)
	$(CDK) diff $(CDK_CONTEXT)

deploy: install ## Deploy the stage to the account of your AWS credentials
	$(PY) -m cli check --stage $(STAGE)
	$(CDK) deploy $(CDK_CONTEXT)

# First what the workflow left that holds the stack's network (runs refused unless STOP=1, the endpoint, its
# configurations and models deleted, SageMaker's network interfaces waited for: cli/stage_resources.py), then cdk.
destroy: install ## Delete the stage's stack (STOP=1: stop its runs first; data kept where retain_data is on)
	$(PY) -m cli check --stage $(STAGE)
	$(PY) -m cli teardown --stage $(STAGE)$(if $(STOP), --stop)
	$(CDK) destroy $(CDK_CONTEXT)

lint: install ## ruff check and format --check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

estimate: install ## Memory, time and cost of the stage's run (ARGS="--preset ... --instance-type ..." over it)
	$(PY) -m infra.estimate --stage $(STAGE) $(if $(CONFIG),--config $(abspath $(CONFIG))) $(ARGS)

# Wheels of training/requirements.txt for the job containers (Python 3.12, x86_64), shipped in the
# training package so that jobs in isolated stages install without PyPI. Needs PyPI here, once.
wheelhouse: install ## Wheels for jobs in isolated stages (needs PyPI, once)
	rm -rf training/wheels
	$(PY) -m pip download -q --only-binary=:all: --implementation cp --python-version 3.12 \
		--platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
		-r training/requirements.txt -d training/wheels

bench: install $(JAX_VENV)/.installed ## Benchmarks (ratios against a reference measured in the same run)
	$(VENV)/bin/pip install -q --no-deps -r bench/requirements.txt
	for b in bench/*_bench.py; do $(PY) $$b || exit 1; done

install: $(VENV)/.installed $(CHECKOV_VENV)/.installed node_modules/.installed

# The Pythons the README promises: pyproject.toml's requires-python (">=3.11,<3.14"). A PYTHON outside them is
# refused in one line, before anything is installed.
PYTHON_RANGE := $(shell sed -n 's/^requires-python = ">=\([0-9.]*\),<\([0-9.]*\)"/\1 \2/p' pyproject.toml)
PYTHON_PROBLEM = $(shell $(PYTHON) -c 'import sys; low, below = (tuple(map(int, v.split("."))) for v in "$(PYTHON_RANGE)".split()); \
	print("" if low <= sys.version_info[:2] < below else "%s is Python %s; this project runs on Python >= %s, < %s (pyproject.toml): \
	pass PYTHON= one in range, e.g. make run PYTHON=python3.12" % ((sys.executable, sys.version.split()[0]) + tuple("$(PYTHON_RANGE)".split())))' \
	2>/dev/null || echo "PYTHON=$(PYTHON) does not run: install Python 3.11 to 3.13 or pass PYTHON= one that does")
# The interpreter PYTHON names (resolved) and the one .venv was built with: naming another on the command line or in
# the environment rebuilds .venv (make rebuilds nothing for the default python3, whatever built .venv).
PYTHON_PATH = $(shell $(PYTHON) -c 'import os, sys; print(os.path.realpath(sys.executable))' 2>/dev/null)
BUILT_WITH = $(shell cat $(VENV)/.built-with 2>/dev/null)
VENV_STALE = $(if $(filter command environment,$(firstword $(origin PYTHON))),$(if $(wildcard $(VENV)),$(filter-out $(BUILT_WITH),$(PYTHON_PATH))))

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-nodeps.txt training/requirements.txt \
		$(if $(VENV_STALE),FORCE)
	$(if $(PYTHON_PROBLEM),$(error $(PYTHON_PROBLEM)))
	$(if $(VENV_STALE),@echo "make: rebuilding $(VENV) with $(PYTHON_PATH) (built with $(or $(BUILT_WITH),an unrecorded Python))" && rm -rf $(VENV))
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps -r requirements-nodeps.txt
	echo $(PYTHON_PATH) > $(VENV)/.built-with
	touch $@

.PHONY: FORCE
FORCE:

# checkov in its own environment: its pins conflict with requirements.txt's (see requirements-checkov.txt).
$(CHECKOV_VENV)/.installed: requirements-checkov.txt | $(VENV)/.installed
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install -q --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install -q -r requirements-checkov.txt
	touch $@

$(HF_VENV)/.installed: requirements-hf.txt
	test -x $(HF_VENV)/bin/python || $(PYTHON) -m venv $(HF_VENV)
	$(HF_VENV)/bin/python -m pip install -q --upgrade pip
	$(HF_VENV)/bin/python -m pip install -q -r requirements-hf.txt
	touch $@

# jaxlib for the HLO benches (hlo_parity, compiled_memory): the exported HLO without TensorFlow, as on the borrowed GPU.
$(JAX_VENV)/.installed: bench/requirements-jax.txt
	test -x $(JAX_VENV)/bin/python || $(PYTHON) -m venv $(JAX_VENV)
	$(JAX_VENV)/bin/python -m pip install -q -r bench/requirements-jax.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci  # quietly: .npmrc (loglevel=error, no update notifier, fund or audit notices)
	touch $@

clean: ## Remove cdk.out, build and runs (the local run's S3, EFS and jobs)
	rm -rf cdk.out build runs
