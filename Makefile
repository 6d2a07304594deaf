# vhpc: two commands do all set-up on a fresh Debian 12 host (as root):
#   make demo   installs everything, builds the kernels, runs a native-vs-VM comparison
#   make test   installs the same and runs the whole test suite
# Both are idempotent: installed packages, the virtualenv and the kernels are reused.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
OUT    ?= vhpc-results

# Debian packages vhpc needs (QEMU, topology and NUMA tools, MPI and compilers for the kernels,
# perf for counters, busybox+cpio for the guest initramfs, chromium for the report browser test,
# hpcc + OpenBLAS/LAPACKE for the standard suite, libvirt-clients to validate generated XML,
# MPICH beside Open MPI for mpi=mpich: Debian gives it a lower alternatives priority, so the
# default mpicc/mpirun stay Open MPI's; OpenSSH, Slurm, munge and MariaDB (slurmdbd's store,
# for sacct) for the ssh environment, the slurm executor and tests/cluster/up); strace for the
# tests that check how the kernels write their records.
APT_PACKAGES := qemu-system-x86 hwloc numactl libnuma-dev openmpi-bin libopenmpi-dev \
	build-essential linux-perf python3-venv busybox-static cpio chromium \
	hpcc libopenblas-dev liblapacke-dev libvirt-clients libxml2-utils mpich libmpich-dev \
	openssh-client openssh-server slurm-wlm slurm-client slurmdbd munge mariadb-server strace
# libvirtd (QEMU driver only, no network) for vm:backend=libvirt; libvirt-dev + pkg-config build
# the libvirt-python binding in the venv (docs/libvirt.md).
APT_PACKAGES += libvirt-daemon-system libvirt-daemon-driver-qemu libvirt-dev pkg-config
# Real applications as benchmarks (docs/applications.md): lmp (built with Open MPI, potentials
# in lammps-data) and gmx/gmx_mpi with their force fields and water boxes (gromacs-data).
APT_PACKAGES += lammps gromacs

.PHONY: all deps venv kernels demo test clean help

all: help

help:
	@echo "make demo   install everything and compare native vs VM on this host"
	@echo "make test   install everything and run the test suite"

deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	ls /boot/vmlinuz-* >/dev/null 2>&1 || missing="$$missing linux-image-amd64"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "vhpc: run as root (or install:$$missing)"; exit 1; fi; \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# uv installs (pip installs uv, then uv the rest), byte-compiling on every core: a fresh venv
# took 38 s with an empty uv cache and 32 s with a warm one here, against 56 s with pip, which
# byte-compiles numpy, scipy and matplotlib on one core.  (uv builds libvirt-python from its
# sdist on every run here, about 6 s of gcc: its cache finds the index answer changed.)
# Copies, not links, so the venv does not depend on uv's cache; the system's CA bundle, as pip
# uses it.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q uv
	$(BIN)/uv pip install -q --native-tls --link-mode=copy --compile-bytecode \
	  --python $(BIN)/python -e '.[test,libvirt]'
	touch $@

# vhpc's own modules byte-compiled ahead (compileall skips those up to date; uv compiles only
# site-packages): where PYTHONDONTWRITEBYTECODE is set (as in this workplace's shell), Python
# would otherwise compile every vhpc module it imports again in every process (0.1 s a start
# here, more in a TCG guest, which sees the host's files read-only), as it would numpy, scipy
# and matplotlib without byte-compiling at install (2.2 s against 0.8 s to import what a
# report needs).
venv: $(VENV)/.installed
	$(BIN)/python -m compileall -q src/vhpc

kernels:
	$(MAKE) -s -j$$(nproc) -C kernels

# 3 measured rounds (vhpc compare's default is 5): the demo stays within 3 minutes on a 2-core
# host where the VM runs under TCG emulation (5 rounds took 3 min 26 s on a loaded one).
demo: deps venv kernels
	$(BIN)/vhpc compare --repeats 3 --out $(OUT)

# CI=true: a test whose tool (above) is missing fails instead of skipping (tests/conftest.py
# require_tool).  One pytest-xdist worker more than the cores (TEST_WORKERS): tests also wait
# (Slurm's SlurmdTimeout, daemons, guests' consoles), and with 2 workers on this 2-core host the
# CPU idled for 15 % of the parallel pass (559 s; 3 workers: 489 s at 97 % busy).  (An older,
# slower suite was no faster with 3: 810-944 s against 912 s.)  --dist loadgroup keeps each
# test module (its guest, daemons) on one worker (tests/conftest.py
# pytest_collection_modifyitems), and --no-loadscope-reorder deals the groups in collection
# order, which puts the slowest first (conftest.SLOW_FIRST).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test: deps venv kernels
	CI=true $(BIN)/python -m pytest -q -ra -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=15 -m "not serial"
	CI=true $(BIN)/python -m pytest -q -ra --durations=5 -m serial

clean:
	$(MAKE) -C kernels clean
	rm -rf $(VENV) src/*.egg-info .pytest_cache
