# Everything starts from `make run` or `make test` on a fresh clone.
PYTHON ?= $(shell scripts/find-python)
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: run test test-fast test-without-showcases lint bench db-stop messages

# The site's port and the SMTP sink's: make run PORT=8001 SMTP_PORT=1026
PORT ?= 8000
SMTP_PORT ?= 1025

# rundev runs the system checks once for all its processes; migrate need not print them first.
run: export DJANGO_DEBUG := 1
run: $(VENV)/.installed
	$(PY) manage.py migrate --noinput --skip-checks
	$(PY) manage.py rundev --port $(PORT) --smtp-port $(SMTP_PORT)

test: $(VENV)/.installed
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# The edit-test loop: everything but the Chromium and Firefox (browser) and gunicorn-behind-nginx (deploy) tests.
test-fast: $(VENV)/.installed
	$(VENV)/bin/pytest -m "not browser and not deploy" $(PYTEST_ARGS)

# The engine's, the recipients' and the accounts' tests again on a site without the showcase
# (V10R_SHOWCASES=0): the tests that need it are marked showcase and deselected, never skipped.
test-without-showcases: export V10R_SHOWCASES := 0
test-without-showcases: $(VENV)/.installed
	$(VENV)/bin/pytest -m "not browser and not deploy and not showcase" tests/notifications tests/recipients tests/accounts tests/test_layers.py $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(PY) -m pwa.icons --check

# Benchmarks, not tests: numbers to read, on DATABASE_URL's server or the embedded one.
bench: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[test,bench]' && npm install --prefix bench --no-audit --no-fund --silent
	$(PY) bench/drain_throughput.py && $(PY) bench/palette.py && $(PY) bench/admin_pages.py
	$(PY) bench/upload_memory.py && $(PY) bench/slow_clients.py && $(PY) bench/lane_cpu.py
	$(PY) bench/email_throughput.py && $(PY) bench/webhook_throughput.py && $(PY) bench/browser_lanes.py
	$(PY) bench/claim_latency.py && $(PY) bench/refused_upload.py
	$(PY) bench/pickup_latency.py && $(PY) bench/telegram_paced.py && $(PY) bench/digests.py
	$(PY) bench/inbox.py && $(PY) bench/reset_timing.py && $(PY) bench/inbox_flood.py
	$(PY) bench/single_send.py && $(PY) bench/broadcast.py

db-stop: $(VENV)/.installed
	$(PY) -m v10r.embedded_postgresql stop

# Needs GNU gettext; the compiled .mo files are committed so nobody else does.
messages: export DJANGO_DEBUG := 1
messages: $(VENV)/.installed
	$(PY) manage.py makemessages -l ru -l de --ignore '.venv/*' && $(PY) manage.py compilemessages --ignore '.venv/*'

# Reinstall only when the dependency list changes.
$(VENV)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "make: no suitable Python (see above)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]' && touch $@
