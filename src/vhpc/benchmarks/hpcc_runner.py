"""Run Debian's HPC Challenge binary (``hpcc``) once and print its output file.

Used by the ``hpcc`` benchmark (:mod:`vhpc.benchmarks.suites`) as the trial command, on the
host or inside a guest (which shares the host's root filesystem read-only and has a writable
``/tmp``).  Standard library only, so it runs as ``python3 -S hpcc_runner.py`` anywhere::

    hpcc_runner.py --n 500 --nb 64 --p 1 --q 2 -- mpirun ... -np 2 hpcc

It creates a fresh scratch directory (under ``$TMPDIR`` or ``/tmp``), writes ``hpccinf.txt``
there for the requested HPL problem size N, block size NB and process grid P x Q (HPL.dat
layout: line 6 Ns, line 8 NBs, lines 11-12 Ps and Qs), runs the launcher command after ``--``
in that directory with its stdout and stderr both sent to this script's stderr, then prints
``hpccoutf.txt`` on stdout and removes the directory.  hpcc *appends* to ``hpccoutf.txt``, which
is why every run gets a new directory.

Exit status: the launcher's status; 127 if it cannot be started; 1 if it wrote no output
file (with one ``error:`` line on stderr); 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

# HPL.dat-style input, hpcc 1.5.0 layout; {n}, {nb}, {p}, {q} are filled in.  Lines 33-36 keep
# PTRANS at its default (no additional sizes: it runs at N/2 with the HPL block size).
INPUT_TEMPLATE = """\
HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
{n}          Ns
1            # of NBs
{nb}         NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
{p}          Ps
{q}          Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0            Number of additional problem sizes for PTRANS
1200         values of N
0            number of additional blocking sizes for PTRANS
40           values of NB
"""

OUTPUT_FILE = "hpccoutf.txt"


def input_text(n: int, nb: int, p: int, q: int) -> str:
    """The ``hpccinf.txt`` contents for one HPL problem (N, NB) on a P x Q grid."""
    return INPUT_TEMPLATE.format(n=n, nb=nb, p=p, q=q)


def positive(text: str) -> int:
    """``text`` as an integer of at least 1 (an argparse ``type=``).  Raises ValueError when it is
    not an integer, argparse.ArgumentTypeError when it is below 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (see the module docstring)."""
    ap = argparse.ArgumentParser(
        prog="hpcc_runner.py",
        description="Write hpccinf.txt in a fresh scratch directory, run hpcc there, print "
                    "hpccoutf.txt.")
    ap.add_argument("--n", type=positive, required=True, help="HPL matrix order N")
    ap.add_argument("--nb", type=positive, required=True, help="HPL block size NB")
    ap.add_argument("--p", type=positive, required=True, help="process grid rows P")
    ap.add_argument("--q", type=positive, required=True, help="process grid columns Q")
    ap.add_argument("command", nargs=argparse.REMAINDER,
                    help="-- followed by the launcher, e.g. -- mpirun -np 2 hpcc")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the command after --, e.g. -- mpirun -np 2 hpcc")

    scratch = tempfile.mkdtemp(prefix="vhpc-hpcc-")
    try:
        with open(os.path.join(scratch, "hpccinf.txt"), "w") as f:
            f.write(input_text(args.n, args.nb, args.p, args.q))
        outfile = os.path.join(scratch, OUTPUT_FILE)
        if os.path.exists(outfile):  # a fresh directory has none; kept for safety
            os.unlink(outfile)
        sys.stderr.write(f"vhpc hpcc runner: N={args.n} NB={args.nb} P={args.p} Q={args.q} "
                         f"in {scratch}: {' '.join(command)}\n")
        sys.stderr.flush()
        try:
            rc = subprocess.call(command, cwd=scratch, stdout=sys.stderr.fileno(),
                                 stderr=sys.stderr.fileno())
        except OSError as exc:
            sys.stderr.write(f"error: cannot start {command[0]}: {exc}; install the hpcc and "
                             "openmpi-bin packages\n")
            return 127
        if not os.path.exists(outfile):
            sys.stderr.write(f"error: hpcc wrote no {OUTPUT_FILE} (exit status {rc})\n")
            return rc or 1
        with open(outfile, errors="replace") as f:
            sys.stdout.write(f.read())
        sys.stdout.flush()
        return rc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
