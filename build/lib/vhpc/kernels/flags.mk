# Toolchain settings shared by kernels/Makefile and kernels/npb/Makefile.
# -O3 as the reference codes build (NPB 3.4 make.def, Mantevo HPCCG, STREAM's README advice).
# No -march=native unless asked (make MARCH=native): the same binaries run in QEMU guests whose
# CPU model differs (TCG or KVM); the flags used are written to $(BUILD)/build-flags, which vhpc
# records in the environment fingerprint.
CC       ?= gcc
MPICC    ?= mpicc
CSTD     := -std=c11
CPPFLAGS += -D_GNU_SOURCE
CFLAGS   ?= -O3 -g
ifneq ($(MARCH),)
CFLAGS   += -march=$(MARCH)
endif
WARN     := -Wall -Wextra
OPENMP   := -fopenmp
LDLIBS   += -lm
