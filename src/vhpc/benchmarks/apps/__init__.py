"""Real applications as registered benchmarks: LAMMPS (:mod:`.lammps`) and GROMACS
(:mod:`.gromacs`) from Debian, with inputs vhpc writes itself, launched through the same MPI
launcher, binding and rank read-back as vhpc's own kernels (:mod:`.common`, ``rankrun.py``).
Each application module registers itself into the ``applications`` suite
(:data:`.common.APPS`) when the benchmark registry imports it."""
