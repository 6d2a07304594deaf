"""Analysis room: statistics on stored observations, comparisons against a baseline environment.

Pure computation: imports only :mod:`vhpc.core.metrics`, :mod:`vhpc.core.stats` (every formula) and
numerical libraries; performs no I/O.

Entry point: :func:`analyse` turns observations (one metric value of one trial each) into an
:class:`Analysis` holding

* :class:`Summary` per (benchmark, params, metric, environment, group) — mean, median, standard
  deviation, Student-t confidence interval of the mean, coefficient of variation, outliers;
* :class:`Comparison` per (benchmark, params, metric, environment ≠ baseline) — ratio of
  geometric means with its interval at the level of its family (Welch's t on ln values, Holm
  over the campaign's primary metrics or within a sweep), the one overhead in percent, the
  p-values, and the verdict read off that interval: slower / faster / equivalent (within
  ±margin, TOST) / inconclusive;
* :class:`CheckResult` per check figure (energy, residual, verification count) — pass/fail,
  the two values and the tolerance, never a verdict;
* :class:`Finding` — diagnostics from one rule table (:mod:`vhpc.analysis.findings`).

Modules: :mod:`.results` (the records), :mod:`.summaries` (grouping, descriptive statistics),
:mod:`.compare` (ratios, tests, verdicts), :mod:`.findings` (rules), :mod:`.pipeline`
(:func:`analyse`).  Rules applied everywhere: warm-up observations are ignored; invalid
observations and non-finite values are excluded and counted in ``n_invalid``; values keep the
metric's unit; ratios and percentages are dimensionless.
"""

from __future__ import annotations

from vhpc.analysis.compare import overhead_pct
from vhpc.analysis.pipeline import analyse
from vhpc.analysis.results import (
    CV_THRESHOLD, DEFAULT_MARGIN, EQUIVALENT, FASTER, GROUP_ALL, GROUP_COLD, GROUP_WARM,
    INCONCLUSIVE, INSUFFICIENT, MIN_SAMPLES, SLOWER, VERDICTS, Analysis, CheckResult, Comparison,
    Finding, Summary,
)
from vhpc.core.stats import (fieller_interval, holm_adjust, modified_z_outliers, student_t_ci, welch_test)

__all__ = [
    "Analysis", "Comparison", "Finding", "Summary", "analyse", "modified_z_outliers",
    "student_t_ci", "welch_test", "fieller_interval", "overhead_pct", "holm_adjust",
    "GROUP_ALL", "GROUP_COLD", "GROUP_WARM", "VERDICTS", "CV_THRESHOLD", "MIN_SAMPLES",
    "SLOWER", "FASTER", "EQUIVALENT", "INCONCLUSIVE", "INSUFFICIENT", "DEFAULT_MARGIN",
    "CheckResult",
]
