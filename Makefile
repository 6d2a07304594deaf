# vhpc: two commands do all set-up on a fresh Debian 12 host (as root):
#   make demo   installs what the demo uses, runs a native-vs-VM comparison (kernels built on use)
#   make test   installs everything (the demo's packages and the rest) and runs the test suite
# Both are idempotent: installed packages, the virtualenv and the kernels are reused.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
OUT    ?= vhpc-results

# Debian packages the demo uses (make demo installs only these; LAMMPS, GROMACS, Chromium, Slurm
# and MariaDB would take minutes): QEMU, topology and NUMA tools, MPI and the C compiler and
# make for the kernels (not build-essential's C++ and packaging tools), perf for counters,
# busybox+cpio for the guest initramfs.  OpenBLAS/LAPACKE are make test's: linpack is no demo
# benchmark; make kernels builds every other kernel without them and names what it left out
# (benchmarks/base.py KERNEL_LIBRARIES).  make test-fresh proves the list on a fresh root.
DEMO_PACKAGES := qemu-system-x86 hwloc numactl libnuma-dev openmpi-bin libopenmpi-dev \
	gcc make libc6-dev linux-perf python3-venv busybox-static cpio
# The rest, for make test and the other commands: chromium for the report browser test, hpcc
# for the standard suite, libvirt-clients to validate generated XML, MPICH beside Open MPI for
# mpi=mpich (Debian gives it a lower alternatives priority, so the default mpicc/mpirun stay Open
# MPI's); OpenSSH, Slurm, munge and MariaDB (slurmdbd's store, for sacct) for the ssh
# environment, the slurm executor and tests/cluster/up; strace for the tests that check how the
# kernels write their records.
TEST_PACKAGES := build-essential libopenblas-dev liblapacke-dev \
	chromium hpcc libvirt-clients libxml2-utils mpich libmpich-dev \
	openssh-client openssh-server slurm-wlm slurm-client slurmdbd munge mariadb-server strace
# libvirtd (QEMU driver only, no network) for vm:backend=libvirt; libvirt-dev + pkg-config build
# the libvirt-python binding in the venv (docs/libvirt.md).
TEST_PACKAGES += libvirt-daemon-system libvirt-daemon-driver-qemu libvirt-dev pkg-config
# Real applications as benchmarks (docs/applications.md): lmp (built with Open MPI, potentials
# in lammps-data) and gmx/gmx_mpi with their force fields and water boxes (gromacs-data).
TEST_PACKAGES += lammps gromacs
# The user's own guest image (vm:image=, docs/images.md): qemu-img (overlay, checks), cloud-localds
# (the cloud-init NoCloud seed), debugfs (an image's own kernel for a direct boot); vhpc image
# build's debvm and mmdebstrap; genisoimage's isoinfo, with which the tests read a seed back.
TEST_PACKAGES += qemu-utils cloud-image-utils e2fsprogs debvm mmdebstrap genisoimage
# vhpc image build --bootloader: sfdisk (fdisk) writes the partition table, grub-install puts
# GRUB in the MBR (grub2-common, its i386-pc modules in grub-pc-bin), grub-mkstandalone
# (grub-common, which those depend on) makes the EFI GRUB (x86_64-efi modules in
# grub-efi-amd64-bin), mkfs.vfat (dosfstools) and mtools write the EFI system partition without
# mounting it; ovmf is the UEFI firmware of boot=uefi.
TEST_PACKAGES += fdisk grub2-common grub-pc-bin grub-efi-amd64-bin dosfstools mtools ovmf
APT_PACKAGES := $(DEMO_PACKAGES) $(TEST_PACKAGES)

.PHONY: all deps deps-demo venv venv-demo kernels kernels-mk demo test test-fresh test-images bench clean help

all: help

help:
	@echo "make demo   install what the demo uses and compare native vs VM on this host"
	@echo "make test   install everything and run the test suite"
	@echo "make bench  print vhpc's performance figures (docs/performance.md)"
	@echo "make test-fresh   make demo in a fresh Debian 12 root, as a new user's machine runs it"
	@echo "make test-images  build Debian images (bare, GRUB, GRUB EFI) and boot them (slow)"

# PACKAGES: which Debian packages to make sure of (deps: all of them; deps-demo: the demo's).
# A host without /boot/vmlinuz-* (a container or chroot, which boots no kernel of its own)
# gets linux-image-amd64 for the guests, without an initramfs: vhpc boots the kernel with its
# own busybox initramfs (environments/vm/guestimage.py), and Debian's initramfs-tools hook
# skips the image when INITRD=No (/etc/kernel/postinst.d/initramfs-tools).
NO_INITRD = $$(ls /boot/vmlinuz-* >/dev/null 2>&1 || echo INITRD=No)
define install_missing
	@missing=""; \
	for p in $(1); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	ls /boot/vmlinuz-* >/dev/null 2>&1 || missing="$$missing linux-image-amd64"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "vhpc: run as root (or install:$$missing)"; exit 1; fi; \
	  echo "installing:$$missing"; \
	  apt-get update -qq && env DEBIAN_FRONTEND=noninteractive $(NO_INITRD) apt-get install -y -qq \
	    --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call install_missing,$(APT_PACKAGES))

deps-demo:
	$(call install_missing,$(DEMO_PACKAGES))

# uv in a virtualenv of its own under the user's cache, made once (8 s: a venv with pip, then
# pip install uv); each venv after it takes uv 1 s to create, pip seeded in it as venv does,
# on the same interpreter (never one uv would download).  Every uv call that reaches an index
# trusts the system's CA store (--native-tls), as pip does: behind a TLS-intercepting proxy
# whose CA is only there, uv's own bundle fails with "invalid peer certificate".
UV_HOME ?= $(HOME)/.cache/vhpc-build/uv
UV := $(UV_HOME)/bin/uv
$(UV):
	$(PYTHON) -m venv $(UV_HOME)
	$(UV_HOME)/bin/pip install -q uv

$(BIN)/python: | $(UV)
	$(UV) venv -q --seed --native-tls --no-python-downloads --python "$$(command -v $(PYTHON))" $(VENV)

# uv installs the rest (a fresh venv: 38 s with an empty uv cache, 56 s with pip).  Offline
# first: with every package in uv's cache the install takes 4 s instead of 13 (online, uv asks
# the index again and rebuilds libvirt-python from its sdist); a package not in the cache fails
# the offline try, and the online install follows.  Copies, not links, so the venv does not
# depend on uv's cache; the system's CA bundle, as pip uses it.
# The demo's venv has vhpc and its dependencies; make test's adds the test tools and the libvirt
# binding (whose build needs libvirt-dev, a test package).
UV_INSTALL := $(UV) pip install -q --native-tls --link-mode=copy --python $(BIN)/python
define uv_install
	$(UV_INSTALL) --offline $(1) 2>/dev/null || $(UV_INSTALL) $(1)
	if [ -n "$$PYTHONDONTWRITEBYTECODE" ]; then $(BIN)/python -m compileall -q -j0 -x '/tests?/' \
	  $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))'); fi
	touch $@
endef
TEST_EXTRAS := '.[test,libvirt]'
$(VENV)/.installed-demo: pyproject.toml | $(BIN)/python
	$(call uv_install,-e .)
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(call uv_install,-e $(TEST_EXTRAS))
	touch $(VENV)/.installed-demo

# Byte-compiled ahead, on every core (compileall skips what is up to date): vhpc's own modules
# (a TCG guest sees the host's files read-only and cannot write them), and where
# PYTHONDONTWRITEBYTECODE is set (as in some shells) site-packages without the packages' own
# test folders (7.7 s on 2 cores): Python would otherwise compile every module it imports again
# in every process, 2.2 s against 0.8 s to import what a report needs.  Without it (a fresh
# root login) the first import writes the bytecode of what is used, a fraction of the whole.
venv: $(VENV)/.installed
	$(BIN)/python -m compileall -q src/vhpc

venv-demo: $(VENV)/.installed-demo
	$(BIN)/python -m compileall -q src/vhpc

# Every kernel this host can build, through vhpc (benchmarks.build_kernels) as a campaign's first
# use builds the ones it runs: make with the build key, which vhpc then records in
# kernels/build/build-key (a plain `make -C kernels` records none, and the first campaign after
# it would rebuild in place, under a guest running them from the host's root).  A kernel whose
# library is missing is named in one line with its package and left out.
kernels: venv-demo
	$(BIN)/python -c 'from vhpc.benchmarks import build_kernels; build_kernels()'

# kernels/kernels.mk, the kernel lists kernels/Makefile builds from, rewritten from what the
# benchmarks declare (their Kernel: source, serial/OpenMP/MPI, libraries); run it after adding
# or changing a kernel (tests/test_kernels_optional.py fails while the file is stale).
kernels-mk: venv
	$(BIN)/python -c 'from vhpc.benchmarks.base import kernels_include; print(kernels_include(), end="")' > kernels/kernels.mk.new
	mv kernels/kernels.mk.new kernels/kernels.mk

# The demo's campaign: 3 measured rounds (vhpc compare's default is 5) of the quick suite at
# demo sizes, so that install, build and campaign fit in 3 minutes on a fresh 2-core machine
# where the VM runs under TCG (no KVM): STREAM at the kernel's floor of 2,000,000 elements per
# array (48 MB in all, not 4 x the LLC: under TCG a 400 MB run takes 12 s a trial), ping-pong's
# bandwidth at 64 KiB messages (1 MiB windows are most of its 8 s a trial), the noise spin for
# 0.5 s and page faults over 16 MiB: 22.6 s against 59.6 s at the suite's own sizes
# (docs/performance.md).  The report names these parameters; `vhpc compare` without -b runs the
# quick suite at its own defaults.
DEMO_BENCH := -b stream:n=2000000 -b randomaccess -b pingpong:bw_size=65536 \
	-b noise:duration=0.5 -b pagefault:mib=16
# The campaign builds the five kernels it runs on first use (not NPB's, HPCCG's, OSU's).
demo: deps-demo venv-demo
	$(BIN)/vhpc compare --repeats 3 $(DEMO_BENCH) --out $(OUT)

# CI=true: a test whose tool (above) is missing fails instead of skipping (tests/conftest.py
# require_tool).  One pytest-xdist worker more than the cores (TEST_WORKERS): tests also wait
# (Slurm's SlurmdTimeout, daemons, guests' consoles), and with 2 workers on a 2-core host the
# CPU idles for 15 % of the parallel pass (3 workers: 97 % busy).  --dist loadgroup keeps each
# test module (its guest, daemons) on one worker (tests/conftest.py
# pytest_collection_modifyitems), and --no-loadscope-reorder deals the groups in collection
# order, which puts the slowest first (conftest.SLOW_FIRST).  PYTHONDONTWRITEBYTECODE emptied:
# pytest keeps the test modules it rewrote for assert introspection in tests/__pycache__ only
# when Python may write bytecode; the serial pass then collects in 3 s instead of 8.6 s.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
PYTEST := CI=true PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -ra
test: deps venv kernels
	$(PYTEST) -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=15 -m "not serial" \
	  --junitxml=.pytest-times.xml
	$(PYTEST) --durations=5 -m serial --junitxml=.pytest-times-serial.xml

# Every performance figure vhpc keeps (docs/performance.md records them with their machine):
# the harness's cost per native trial and where it goes, analyse() on 10^6 samples, a cold VM
# trial against a bare QEMU boot, the last make test's time per test file and pass, and the last
# make test-fresh's demo time.  Seconds to a few minutes; the figures are noisy on a shared host
# (run it on a quiet one).  Then the full fuzz run (tests/test_fuzz_spec.py marked heavy: 3,000
# command lines and 1,000 campaign files, minutes).
bench: venv kernels
	$(BIN)/python bench/bench_harness.py
	$(BIN)/python bench/bench_analysis.py
	$(BIN)/python bench/bench_history.py
	$(BIN)/python bench/bench_vm_cycle.py --runs 3
	$(BIN)/python bench/bench_suite.py
	$(PYTEST) -p no:xdist -s -m heavy tests/test_stat_rates.py
	$(PYTEST) -p no:xdist -m heavy tests/test_fuzz_spec.py

# make demo where only its own packages exist: a minimal Debian 12 root (mmdebstrap, which make
# deps installs), this host's apt sources, CA certificates and pip configuration, a clone of
# HEAD, make demo inside a private mount and PID namespace (tests/fresh/run says how); then the
# commands whose packages the demo left out must each say so in one line.  About 4 minutes;
# .ci/run runs it after make test.  Run it whenever the Makefile, packaging, kernels or
# dependencies change.
test-fresh: deps
	tests/fresh/run

# The image boots make test leaves out (tests marked `images`): vhpc image build of a bare, a
# GRUB and a GRUB EFI Debian image (cached in ~/.cache/vhpc/images after the first build), each
# booted under TCG by campaigns (QEMU and libvirt, SeaBIOS and OVMF, a vcluster of two guests
# on one host and across two Slurm nodes of the test cluster).
# Minutes per boot; one at a time: the guests need the CPUs.
test-images: deps venv kernels
	VHPC_VM_TESTS=1 $(PYTEST) --durations=0 -m images tests/test_userimage_boot.py

clean:
	$(MAKE) -C kernels clean
	rm -rf $(VENV) src/*.egg-info .pytest_cache .pytest-times*.xml
