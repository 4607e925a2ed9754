# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test setup system bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP) system

# Java 17+ for the Spark pipeline, Chromium for the report test: apt-get installs what is missing.
system:
	@bash scripts/ensure-system.sh

# The main job on the embedded default: synthetic monitoring data of diamond-30 (dirty rows
# included) -> Spark ingest (local) -> snapshot -> I-Scheduler placement -> every scheduler
# compared on the measured graph, with an HTML report in out/demo/report.html.
DEMO := out/demo
demo: setup
	rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(BIN)/streamsched pipeline-demo --workload diamond-30 --cluster heterogeneous-10 \
		--scheduler i-scheduler --out $(DEMO) > $(DEMO)/pipeline.json
	@$(BIN)/python -c "import json; r = json.load(open('$(DEMO)/pipeline.json')); i = r['ingest']; \
		print('ingest:', i['rows_read'], 'rows read =', i['rows_accepted'], 'accepted +', sum(i['rows_quarantined'].values()), 'quarantined', i['rows_quarantined']); \
		print('snapshot:', r['snapshot'])"
	$(BIN)/streamsched compare --graph $(DEMO)/store/snapshots/diamond-30/*/diamond-30.parquet \
		--cluster heterogeneous-10 --schedulers all --report $(DEMO)/report.html

test: setup
	$(BIN)/python -m pytest -q --durations=15

bench: setup
	$(BIN)/python benchmarks/bench_core.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
