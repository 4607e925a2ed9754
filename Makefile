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

# The Flink placement plugin (Java, javac against the apache-flink-libraries jars) is built into
# the package: `streamsched flink-plugin path` prints where.
setup: $(STAMP) system
	$(BIN)/python -m streamsched.engines.flink.plugin

# A JDK 17+ for the Spark pipeline and the Flink plugin's javac, Chromium for the report test: apt-get installs what is missing.
system:
	@bash scripts/ensure-system.sh

# The main job, on a workload where placement matters: synthetic monitoring data of Fischer's
# Payload topology (10 fields-grouped chains of 8 tasks, 3 KB tuples; dirty rows included) ->
# Spark ingest (local) -> snapshot -> I-Scheduler placement -> every cluster scheduler compared on
# the measured graph on 11 iMacs (fischer-11), ranked by inter-node traffic, ending with the
# verdict against Storm's `even` on the model set fitted on Fischer's iMacs (fischer-imac) and an
# HTML report in out/demo/report.html.
DEMO := out/demo
demo: setup
	rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(BIN)/streamsched pipeline-demo --workload fischer-payload-10 --cluster fischer-11 \
		--scheduler i-scheduler --out $(DEMO) --json > $(DEMO)/pipeline.json
	@$(BIN)/python -c "import json; r = json.load(open('$(DEMO)/pipeline.json')); i = r['ingest']; \
		print('ingest:', i['rows_read'], 'rows read =', i['rows_accepted'], 'accepted +', sum(i['rows_quarantined'].values()), 'quarantined', i['rows_quarantined']); \
		print('snapshot:', r['snapshot'])"
	$(BIN)/streamsched compare \
		--graph "$$($(BIN)/python -c "import json; print(json.load(open('$(DEMO)/pipeline.json'))['snapshot'])")" \
		--cluster $(DEMO)/cluster.json --schedulers all --model fischer-imac --report $(DEMO)/report.html
	@echo "report: $(DEMO)/report.html (verdict on top; report.json holds it as 'verdict')"

test: setup
	$(BIN)/python -m pytest -q --durations=15

bench: setup
	$(BIN)/python benchmarks/bench_core.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
