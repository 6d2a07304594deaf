"""vhpc: how much virtualization costs an HPC workload on this host, and which VM placement is cheapest.

Rooms (imports only go left): model → topology → placement → environments → benchmarks →
campaign → store → analysis → report → cli.  See docs/design.md.
"""

__version__ = "0.1.0"
