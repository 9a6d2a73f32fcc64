# Two entry points: `make demo` (prepare everything, run the main job on this
# machine) and `make test` (lint and type checks, then the whole suite). CK_REPOS / CK_TOOLS are honoured
# when set; otherwise ck uses its usual places (~/CK, ~/CK-TOOLS).

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
VPY := $(VENV)/bin/python
CK := $(VENV)/bin/ck
STAMP := $(VENV)/.installed

.PHONY: demo test lint testbed-deps setup check-python bench clean

demo: setup
	$(VPY) -m reprokit.bootstrap
	$(CK) run program:p3 --cmd_key=resnet --treat_return_code_as_exit_code=yes < /dev/null
	@echo "Unified result ($$($(CK) find program:p3)/tmp/latest/p3-result.json):"
	@cat "$$($(CK) find program:p3)/tmp/latest/p3-result.json"
	@echo; echo "ck is in $(VENV)/bin: in each new shell, '. $(VENV)/bin/activate' before the README's ck commands"

# The whole suite in two parts: the end-to-end and fault tests one at a time (they train with real MXNet on both
# cores, share the machine's namespaces, and many time what they detect), then the tests marked `parallel` (the
# unit tests and the ck-command-only modules) on two workers (pytest-xdist); both parts always run, and the first
# failure's code is make's. The serial tier's failures are repeated at the very end, so that a log's last lines
# (all a CI page may keep) name every failed test of both tiers.
SERIAL_LOG := $(VENV)/serial-tier.log
test: setup testbed-deps lint
	set -o pipefail; $(VPY) -m pytest -m "not parallel" 2>&1 | tee $(SERIAL_LOG); first=$$?; \
	  $(VPY) -m pytest -n 2 -m parallel; second=$$?; \
	  if [ $$first != 0 ]; then echo "make test: the serial tier failed (exit $$first):"; \
	    grep -E '^(FAILED|ERROR) |^=+ .* in [0-9.]+s' $(SERIAL_LOG) || tail -n 20 $(SERIAL_LOG); fi; \
	  exit $$(( first != 0 ? first : second ))

# ruff over the framework, the engine-side scripts, tests and benchmarks; mypy over the framework and the
# engine-side scripts (its configuration, strict for the typed model, is in pyproject.toml). A few seconds.
lint: check-python $(STAMP)
	$(VENV)/bin/ruff check src program/p3 tests benchmarks
	$(VENV)/bin/mypy

# The testbed tests need root, iproute2 and Debian's openssh-server, the Slurm testbed's also Debian's slurmctld,
# slurmd, slurm-client and munge, the oarsh launcher's Debian's oar-node (oarsh, oarsh_shell, oardodo); the study
# report test opens the HTML report in Debian's chromium. As root, install what is missing; policy-rc.d keeps the
# packages from starting a system-wide sshd, slurmctld, slurmd, munged or OAR sshd (the testbed starts its own);
# apt waits up to 10 minutes for another install to release its lock.
testbed-deps:
	@if [ "$$(id -u)" = 0 ] && { [ ! -x /usr/sbin/sshd ] || ! command -v ip >/dev/null || ! command -v chromium >/dev/null \
	    || [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/slurmd ] || ! command -v srun >/dev/null || [ ! -x /usr/sbin/munged ] \
	    || [ ! -x /usr/lib/oar/oarsh_shell ] || ! command -v oarsh >/dev/null; }; then \
	  echo "make: installing openssh-server, iproute2, chromium, slurmctld, slurmd, slurm-client, munge and oar-node for the testbed and report tests"; \
	  created=; if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; created=1; fi; \
	  apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq openssh-server iproute2 chromium slurmctld slurmd slurm-client munge oar-node >/dev/null; rc=$$?; \
	  if [ -n "$$created" ]; then rm -f /usr/sbin/policy-rc.d; fi; exit $$rc; \
	fi

bench: setup
	$(VPY) -m reprokit.bootstrap
	$(VPY) benchmarks/ck_overhead.py

# Also registers this repository with CK (alias reproduce-sysml19-paper-p3, moved from an older alias).
setup: check-python $(STAMP)
	$(VPY) -m reprokit.bootstrap --repo-only

check-python:
	@version=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); \
	if [ -z "$$version" ]; then \
	  echo "make: cannot run Python '$(PYTHON)'; install Python 3.11 (e.g. 'pyenv install 3.11') and rerun with PYTHON=/path/to/python3.11"; exit 1; \
	elif [ "$$version" != "3.11" ]; then \
	  echo "make: ck 2.6.4 needs Python <= 3.11 (it imports the removed 'imp' module) and this project pins 3.11, but '$(PYTHON)' is $$version; install 3.11 (e.g. 'pyenv install 3.11') and rerun with PYTHON=/path/to/python3.11"; exit 1; \
	fi

$(STAMP): requirements.txt constraints.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --disable-pip-version-check -q -r requirements.txt -c constraints.txt
	$(VPY) -m pip install --disable-pip-version-check -q --no-deps -e .
	touch $(STAMP)

clean:
	rm -rf $(VENV) program/*/tmp
