"""Real applications as registered benchmarks: LAMMPS (:mod:`.lammps`) and GROMACS
(:mod:`.gromacs`) from Debian, with inputs vhpc writes itself, launched through the same MPI
launcher, binding and rank read-back as vhpc's own kernels (:mod:`.common`, ``rankrun.py``)."""

from vhpc.benchmarks.apps.gromacs import Gromacs
from vhpc.benchmarks.apps.lammps import Lammps

#: The application suite, registered in :data:`vhpc.benchmarks.REGISTRY`.
APPS_SUITE = (Lammps(), Gromacs())

__all__ = ["APPS_SUITE", "Gromacs", "Lammps"]
