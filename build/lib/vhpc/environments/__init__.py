"""Environments: where a benchmark runs (``native``, ``vm``).

An environment starts and stops sessions, applies and verifies placement, runs a command
with a timeout and always cleans up its processes.  See :mod:`vhpc.environments.base`.
"""
