"""The works vhpc reproduces and measures against, cited in full: the four seed papers (whose
figures the studies redraw) and the anchors (the benchmark suites and methods vhpc follows).
docs/references.md lists the same citations; the seed pages (``vhpc paper``) cite from here."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Reference", "SEEDS", "ANCHORS", "cite"]


@dataclass(frozen=True)
class Reference:
    """One cited work: ``authors`` as printed on it, ``title``, ``venue`` (proceedings,
    journal or publisher, with the place where it says one), ``year``; ``doi`` or ``url``
    where there is one ("" otherwise)."""

    authors: str
    title: str
    venue: str
    year: int
    doi: str = ""
    url: str = ""

    def text(self) -> str:
        """The citation in one line: authors, "title", venue, year[, doi or url]."""
        where = f", doi:{self.doi}" if self.doi else f", {self.url}" if self.url else ""
        return f'{self.authors}. "{self.title}". {self.venue}, {self.year}{where}.'


#: The seed papers by their number (``"000"``: the study's ``seed``).
SEEDS: dict[str, Reference] = {
    "000": Reference(
        "Khaled Z. Ibrahim, Steven Hofmeyr, Costin Iancu",
        "Characterizing the Performance of Parallel Applications on Multi-Socket Virtual "
        "Machines",
        "11th IEEE/ACM International Symposium on Cluster, Cloud and Grid Computing (CCGrid), "
        "Newport Beach, CA", 2011, doi="10.1109/CCGrid.2011.50"),
    "001": Reference(
        "Lamia Youseff, Rich Wolski, Brent Gorda, Chandra Krintz",
        "Evaluating the Performance Impact of Xen on MPI and Process Execution For HPC Systems",
        "First International Workshop on Virtualization Technology in Distributed Computing "
        "(VTDC '06), held with SC06, Tampa, FL", 2006),
    "003": Reference(
        "Yuxia Cheng, Wenzhi Chen",
        "Evaluation of Virtual Machine Performance on NUMA Multicore Systems",
        "Eighth International Conference on P2P, Parallel, Grid, Cloud and Internet Computing "
        "(3PGCIC), Compiègne, IEEE, pp. 136-143", 2013, doi="10.1109/3PGCIC.2013.27"),
    "004": Reference(
        "John R. Lange, Kevin Pedretti, Peter Dinda, Patrick G. Bridges, Chang Bae, "
        "Philip Soltero, Alexander Merritt",
        "Minimal-overhead Virtualization of a Large Scale Supercomputer",
        "7th ACM SIGPLAN/SIGOPS International Conference on Virtual Execution Environments "
        "(VEE '11), Newport Beach, CA", 2011, doi="10.1145/1952682.1952705"),
}

#: The benchmark suites and methods vhpc follows, by a short name used in docs and comments.
ANCHORS: dict[str, Reference] = {
    "hoefler-belli": Reference(
        "Torsten Hoefler, Roberto Belli",
        "Scientific Benchmarking of Parallel Computing Systems: Twelve Ways to Tell the Masses "
        "when Reporting Performance Results",
        "International Conference for High Performance Computing, Networking, Storage and "
        "Analysis (SC '15), Austin, TX, ACM", 2015, doi="10.1145/2807591.2807644"),
    "osu": Reference(
        "Network-Based Computing Laboratory, The Ohio State University (D. K. Panda et al.)",
        "OSU Micro-Benchmarks 7.4", "MVAPICH project", 2024,
        url="https://mvapich.cse.ohio-state.edu/benchmarks/"),
    "npb": Reference(
        "D. H. Bailey, E. Barszcz, J. T. Barton, D. S. Browning, R. L. Carter, L. Dagum, "
        "R. A. Fatoohi, P. O. Frederickson, T. A. Lasinski, R. S. Schreiber, H. D. Simon, "
        "V. Venkatakrishnan, S. K. Weeratunga",
        "The NAS Parallel Benchmarks",
        "International Journal of Supercomputer Applications 5(3):63-73", 1991,
        doi="10.1177/109434209100500306"),
    "stream": Reference(
        "John D. McCalpin",
        "Memory Bandwidth and Machine Balance in Current High Performance Computers",
        "IEEE Computer Society Technical Committee on Computer Architecture (TCCA) Newsletter",
        1995, url="https://www.cs.virginia.edu/stream/"),
    "hpccg": Reference(
        "Michael A. Heroux, Douglas W. Doerfler, Paul S. Crozier, James M. Willenbring, "
        "H. Carter Edwards, Alan Williams, Mahesh Rajan, Eric R. Keiter, Heidi K. Thornquist, "
        "Robert W. Numrich",
        "Improving Performance via Mini-applications (Mantevo; HPCCG)",
        "Sandia National Laboratories, Technical Report SAND2009-5574", 2009),
    "hpcc": Reference(
        "Piotr Luszczek, David H. Bailey, Jack J. Dongarra, Jeremy Kepner, Robert F. Lucas, "
        "Rolf Rabenseifner, Daisuke Takahashi",
        "The HPC Challenge (HPCC) Benchmark Suite",
        "Proceedings of the 2006 ACM/IEEE Conference on Supercomputing (SC '06), Tampa, FL",
        2006),
    "lammps": Reference(
        "A. P. Thompson, H. M. Aktulga, R. Berger, D. S. Bolintineanu, W. M. Brown, "
        "P. S. Crozier, P. J. in 't Veld, A. Kohlmeyer, S. G. Moore, T. D. Nguyen, R. Shan, "
        "M. J. Stevens, J. Tranchida, C. Trott, S. J. Plimpton",
        "LAMMPS - a flexible simulation tool for particle-based materials modeling at the "
        "atomic, meso, and continuum scales",
        "Computer Physics Communications 271:108171", 2022, doi="10.1016/j.cpc.2021.108171"),
    "gromacs": Reference(
        "Mark James Abraham, Teemu Murtola, Roland Schulz, Szilárd Páll, Jeremy C. Smith, "
        "Berk Hess, Erik Lindahl",
        "GROMACS: High performance molecular simulations through multi-level parallelism from "
        "laptops to supercomputers",
        "SoftwareX 1-2:19-25", 2015, doi="10.1016/j.softx.2015.06.001"),
}


def cite(seed: str) -> str:
    """The full citation of seed paper ``seed`` ("000", ...), or "" for an unknown number."""
    ref = SEEDS.get(seed)
    return ref.text() if ref else ""
