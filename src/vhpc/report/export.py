"""CSV and JSON export of an :class:`~vhpc.analysis.Analysis` and its observations.

Every row (sample, summary, comparison) carries the environment's accelerator (``accel``:
``kvm``, ``tcg`` or empty for native) and ``emulated`` (true for TCG), so an exported number can
never be mistaken for a hardware-virtualization result.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, Iterable

from vhpc.analysis import Analysis
from vhpc.model import Observation

__all__ = ["write_csv", "write_json", "SAMPLE_COLUMNS", "COMPARISON_COLUMNS"]

#: columns of the samples CSV, in order
SAMPLE_COLUMNS = [
    "environment", "accel", "emulated", "benchmark", "params", "metric", "unit",
    "higher_is_better", "value", "valid", "warmup", "trial_id", "round", "session_index",
]
#: columns of the comparisons CSV, in order
COMPARISON_COLUMNS = [
    "benchmark", "params", "metric", "unit", "higher_is_better", "environment", "accel",
    "emulated", "baseline", "n", "n_baseline", "mean", "mean_baseline", "ratio", "ratio_ci_low",
    "ratio_ci_high", "overhead_pct", "overhead_ci_low", "overhead_ci_high", "p_value",
    "p_adjusted", "verdict", "df",
]


def _env(analysis: Analysis, name: str) -> tuple[str | None, bool]:
    info = analysis.environments.get(name)
    if info is None:
        return None, False
    return info.accel, bool(info.emulated)


def _num(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _sample_row(analysis: Analysis, o: Observation) -> dict[str, Any]:
    accel, emulated = _env(analysis, o.environment)
    return {
        "environment": o.environment,
        "accel": accel,
        "emulated": emulated,
        "benchmark": o.benchmark,
        "params": o.params,
        "metric": o.metric,
        "unit": o.unit,
        "higher_is_better": o.higher_is_better,
        "value": _num(o.value),
        "valid": o.valid,
        "warmup": o.warmup,
        "trial_id": o.trial_id,
        "round": o.round,
        "session_index": o.session_index,
    }


def write_csv(
    analysis: Analysis,
    observations: Iterable[Observation],
    samples_path: str | Path,
    comparisons_path: str | Path,
) -> tuple[Path, Path]:
    """Write two CSV files (UTF-8, header row, ``csv`` module's default dialect).

    samples_path: one row per observation, warm-up and invalid ones included, columns
    :data:`SAMPLE_COLUMNS`; values in the metric's unit.  comparisons_path: one row per
    :class:`~vhpc.analysis.Comparison`, columns :data:`COMPARISON_COLUMNS` (ratio and CI
    dimensionless, overhead in percent).  Booleans are written ``true``/``false``, missing
    values as empty cells.  Returns both paths; raises OSError when a file cannot be written.
    """

    def cell(v: Any) -> Any:
        if v is None:
            return ""
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return repr(v) if math.isfinite(v) else ""
        return v

    samples_path, comparisons_path = Path(samples_path), Path(comparisons_path)
    with samples_path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=SAMPLE_COLUMNS)
        w.writeheader()
        for o in observations:
            w.writerow({k: cell(v) for k, v in _sample_row(analysis, o).items()})
    with comparisons_path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COMPARISON_COLUMNS)
        w.writeheader()
        for c in analysis.comparisons:
            accel, emulated = _env(analysis, c.environment)
            row = {
                "benchmark": c.benchmark,
                "params": c.params,
                "metric": c.metric,
                "unit": c.unit,
                "higher_is_better": c.higher_is_better,
                "environment": c.environment,
                "accel": accel,
                "emulated": emulated,
                "baseline": c.baseline,
                "n": c.n,
                "n_baseline": c.n_baseline,
                "mean": c.mean,
                "mean_baseline": c.mean_baseline,
                "ratio": c.ratio,
                "ratio_ci_low": c.ratio_ci[0],
                "ratio_ci_high": c.ratio_ci[1],
                "overhead_pct": c.overhead_pct,
                "overhead_ci_low": c.overhead_ci[0],
                "overhead_ci_high": c.overhead_ci[1],
                "p_value": c.p_value,
                "p_adjusted": c.p_adjusted,
                "verdict": c.verdict,
                "df": c.df,
            }
            w.writerow({k: cell(v) for k, v in row.items()})
    return samples_path, comparisons_path


def write_json(analysis: Analysis, observations: Iterable[Observation], path: str | Path,
               trials: Iterable[Any] = ()) -> Path:
    """Write one JSON document: ``analysis.to_dict()`` plus ``"samples"`` (one object per
    observation, same fields as the samples CSV, with ``accel`` and ``emulated``) and
    ``"rank_placement"``: for each stored trial of a multi-guest environment (vcluster), every
    MPI rank's guest, vCPU and host CPU as read back.

    Strict JSON (NaN/inf written as null).  Returns the path; raises OSError when it cannot be
    written.
    """
    doc = analysis.to_dict()
    doc["samples"] = [_sample_row(analysis, o) for o in observations]
    doc["rank_placement"] = [
        {"environment": t.environment, "benchmark": t.benchmark, "params": t.params,
         "round": t.round, "ranks": t.applied["ranks"]}
        for t in trials if isinstance(t.applied, dict) and t.applied.get("ranks")]
    path = Path(path)
    with path.open("w", encoding="utf-8") as fh:
        json.dump(doc, fh, allow_nan=False, indent=1)
        fh.write("\n")
    return path
