# Every target builds the virtualenv it needs; `make demo` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
# uv installs the project into the venv: the same resolution as pip, several times faster.
UV := uv==0.13.9

.PHONY: demo test bench venv bytecode clean

$(STAMP): pyproject.toml
	rm -f $(VENV)/.installed-*
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check $(UV)
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(VENV)/bin/python -e '.[test,ray]'
	touch $(STAMP)

venv: $(STAMP)

# The project's own modules, compiled before every run: with PYTHONDONTWRITEBYTECODE set, each of
# the many processes the tests start would otherwise compile every module it imports again.
bytecode: $(STAMP)
	$(VENV)/bin/python bench/bytecode.py

demo: bytecode
	$(VENV)/bin/python -m examples.demo

test: bytecode
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy -p omnigraph
	$(VENV)/bin/python -m pytest -n 2 --dist worksteal -q

# Benchmarks, not tests: CI never runs them. Each prints its table (bench/README.md keeps the last
# measured ones and how to read them); every one runs, and the target fails if any missed its goal.
BENCH_WORKDIR ?= $(or $(TMPDIR),/tmp)/omnigraph-bench

bench: bytecode
	status=0; \
	for script in startup_bench write_bench serve_bench migrate_bench units_bench; do \
		$(VENV)/bin/python bench/$$script.py || status=1; \
	done; \
	$(VENV)/bin/python bench/query_bench.py --work $(BENCH_WORKDIR)/query_bench || status=1; \
	for script in merge_bench mutate_bench commit_split writers_bench; do \
		$(VENV)/bin/python bench/$$script.py --workdir $(BENCH_WORKDIR)/$$script || status=1; \
	done; \
	exit $$status

clean:
	rm -rf $(VENV) demo-out
