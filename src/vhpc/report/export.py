"""Export of an :class:`~vhpc.analysis.Analysis` and its observations: one :class:`Exporter`
protocol for every format (samples CSV, comparisons CSV, JSON, HTML), :data:`EXPORTERS` naming
them and :func:`export_all` writing them into a campaign's folder.

Every row (sample, summary, comparison) carries the environment's accelerator (``accel``:
``kvm``, ``tcg`` or empty for native) and ``emulated`` (true for TCG), so an exported number can
never be mistaken for a hardware-virtualization result.
"""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol

from vhpc.analysis import Analysis
from vhpc.core.errors import VhpcError
from vhpc.core.metrics import Observation

__all__ = ["write_csv", "write_json", "SAMPLE_COLUMNS", "COMPARISON_COLUMNS", "ReportData",
           "Exporter", "EXPORTERS", "export_all"]

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
    "p_adjusted", "verdict", "df", "ratio_ci_method", "note",
]


class ReportPathError(VhpcError):
    """An output path (``--html``, ``--csv``, ``--json``) that cannot be written."""


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

    samples_path, comparisons_path = Path(samples_path), Path(comparisons_path)
    _write_rows(samples_path, SAMPLE_COLUMNS, (_sample_row(analysis, o) for o in observations))
    _write_rows(comparisons_path, COMPARISON_COLUMNS, comparison_rows(analysis))
    return samples_path, comparisons_path


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ""
    return v


def _write_rows(path: str | Path, columns: list[str], rows: Iterable[dict[str, Any]]) -> None:
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=columns)
        w.writeheader()
        for row in rows:
            w.writerow({k: _cell(v) for k, v in row.items()})


def comparison_rows(analysis: Analysis) -> list[dict[str, Any]]:
    """One dict per comparison with the keys of :data:`COMPARISON_COLUMNS` (ratio interval
    split into low/high, its method in ``ratio_ci_method``, the environment's accelerator)."""
    rows = []
    for c in analysis.comparisons:
        accel, emulated = _env(analysis, c.environment)
        d = {k: getattr(c, k, None) for k in COMPARISON_COLUMNS}
        d.update(accel=accel, emulated=emulated, ratio_ci_low=c.ratio_ci[0],
                 ratio_ci_high=c.ratio_ci[1], overhead_ci_low=c.overhead_ci[0],
                 overhead_ci_high=c.overhead_ci[1])
        rows.append(d)
    return rows


def write_json(analysis: Analysis, observations: Iterable[Observation], path: str | Path,
               trials: Iterable[Any] = (), study: Mapping[str, Any] | None = None) -> Path:
    """Write one JSON document: ``analysis.to_dict()`` plus ``"samples"`` (one object per
    observation, same fields as the samples CSV, with ``accel`` and ``emulated``) and
    ``"rank_placement"``: for each stored MPI trial, every rank's CPUs as read back (and, in a
    multi-guest ``vcluster``, its guest and vCPU).

    Strict JSON (NaN/inf written as null).  Returns the path; raises OSError when it cannot be
    written.
    """
    doc = analysis.to_dict()
    doc["samples"] = [_sample_row(analysis, o) for o in observations]
    doc["rank_placement"] = [
        {"environment": t.environment, "benchmark": t.benchmark, "params": t.params,
         "round": t.round, "ranks": t.applied.ranks}
        for t in trials if getattr(t.applied, "ranks", None)]
    if study:
        doc["study"] = dict(study)  # {"name", "figure": x/y/interval per point, "paper_findings"}
    path = Path(path)
    with path.open("w", encoding="utf-8") as fh:
        json.dump(doc, fh, allow_nan=False, indent=1)
        fh.write("\n")
    return path


@dataclass(frozen=True)
class ReportData:
    """Everything an exporter may present: the analysis, its observations (warm-up and invalid
    included), campaign metadata (``id``, ``date``, ``command``, ...) and extra HTML sections
    ((anchor, title, Markup) from :mod:`vhpc.report.diagnostics`)."""

    analysis: Analysis
    observations: list[Observation]
    campaign: Mapping[str, Any] = field(default_factory=dict)
    sections: tuple = ()
    trials: tuple = ()  # stored trials (store.TrialRow): per-rank placement for the JSON
    study: Mapping[str, Any] | None = None  # study, figure data, paper findings (report.paper)
    study_html: Any = None  # the study's figure and finding lines as HTML Markup


class Exporter(Protocol):
    """One output format: ``name`` (key in :data:`EXPORTERS`), ``filename`` (default name in
    the campaign folder) and ``write(data, path) -> Path`` (raises OSError when it cannot
    write)."""

    name: str
    filename: str

    def write(self, data: ReportData, path: Path) -> Path:
        """Write ``data`` to ``path`` in this format; return the path."""


@dataclass(frozen=True)
class _SamplesCsv:
    name: str = "samples-csv"
    filename: str = "samples.csv"

    def write(self, data: ReportData, path: Path) -> Path:
        _write_rows(path, SAMPLE_COLUMNS, (_sample_row(data.analysis, o) for o in data.observations))
        return Path(path)


@dataclass(frozen=True)
class _ComparisonsCsv:
    name: str = "comparisons-csv"
    filename: str = "comparisons.csv"

    def write(self, data: ReportData, path: Path) -> Path:
        _write_rows(path, COMPARISON_COLUMNS, comparison_rows(data.analysis))
        return Path(path)


@dataclass(frozen=True)
class _Json:
    name: str = "json"
    filename: str = "results.json"

    def write(self, data: ReportData, path: Path) -> Path:
        return write_json(data.analysis, data.observations, path, data.trials, data.study)


@dataclass(frozen=True)
class _Html:
    name: str = "html"
    filename: str = "report.html"

    def write(self, data: ReportData, path: Path) -> Path:
        from vhpc.report.html import write_html

        return write_html(data.analysis, data.observations, path, data.campaign,
                          sections=data.sections, study=data.study_html)


#: every exporter by name, in the order :func:`export_all` writes them
EXPORTERS: dict[str, Exporter] = {e.name: e for e in (_Html(), _SamplesCsv(), _ComparisonsCsv(), _Json())}


def export_all(data: ReportData, folder: str | Path,
               paths: Mapping[str, str | Path | None] | None = None) -> dict[str, Path]:
    """Write every format of :data:`EXPORTERS` into ``folder`` (created if missing) under its
    default file name, or at ``paths[name]`` when given.  Returns name → path written; raises
    OSError when a file cannot be written."""
    from vhpc.core.paths import private_results

    folder = Path(folder)
    out = {}
    with private_results():  # reports hold raw outputs and host facts: 0600 unless shared
        folder.mkdir(parents=True, exist_ok=True)
        for name, exporter in EXPORTERS.items():
            target = (paths or {}).get(name)
            out[name] = exporter.write(data, Path(target) if target else folder / exporter.filename)
    return out


def check_writable(path: str | Path | None, flag: str) -> None:
    """Refuse, before any work, an output path given with ``flag`` that cannot be written: its
    folder missing or not writable, or the path a folder.  Raises ReportPathError (one line)."""
    if not path:
        return
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise ReportPathError(f"{flag} {path}: is a folder: give a file name")
    if not parent.is_dir():
        raise ReportPathError(f"{flag} {path}: folder {parent} does not exist: create it or "
                              "give another path")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ReportPathError(f"{flag} {path}: not writable by you: give another path")
