# Toolchain settings shared by kernels/Makefile and kernels/npb/Makefile.
# No -march=native: the same binaries run in QEMU guests whose CPU model differs (TCG or KVM).
CC       ?= gcc
MPICC    ?= mpicc
CSTD     := -std=c11
CPPFLAGS += -D_GNU_SOURCE
CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra
OPENMP   := -fopenmp
LDLIBS   += -lm
