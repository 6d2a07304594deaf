# The kernels kernels/Makefile builds and how: generated from what vhpc's benchmarks declare
# (vhpc.benchmarks.kernel.Kernel) by `make kernels-mk` in the checkout; do not edit
# (tests/test_kernels_optional.py checks it is current).
SERIAL_KERNELS := vhpc-ivshmem-pingpong vhpc-linpack vhpc-noise vhpc-pagefault
OMP_KERNELS := vhpc-randomaccess vhpc-stream
MPI_KERNELS := vhpc-osu vhpc-pingpong
MPI_OMP_KERNELS := vhpc-hpccg
SUBMAKES := npb
LDLIBS_vhpc-linpack := -llapacke -lopenblas
ifeq ($(and $(wildcard /usr/include/*lapacke.h),$(wildcard /usr/lib/*/libopenblas.so)),)
LACKING += vhpc-linpack
ifeq ($(filter vhpc-linpack,$(SKIP)),)
$(warning LAPACKE + OpenBLAS not found (install liblapacke-dev libopenblas-dev): not building vhpc-linpack)
endif
endif
