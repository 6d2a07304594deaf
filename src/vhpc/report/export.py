"""Export of an :class:`~vhpc.analysis.Analysis` and its observations: one :class:`Exporter`
protocol for every format (samples CSV, comparisons CSV, JSON, HTML), :data:`EXPORTERS` naming
them and :func:`export_all` writing them into a campaign's folder.

Every row (sample, summary, comparison) carries the environment's accelerator (``accel``:
``kvm``, ``tcg`` or empty for native) and ``emulated`` (true for TCG), so an exported number can
never be mistaken for a hardware-virtualization result.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol

from vhpc.analysis import EQUIVALENT, FASTER, INCONCLUSIVE, SLOWER, Analysis
from vhpc.analysis.families import FamilySummary, family_summaries, natural_key
from vhpc.core.errors import VhpcError
from vhpc.core.metrics import Observation
from vhpc.core.paths import check_output, write_atomic
from vhpc.core.records import json_ready
from vhpc.core.text import csv_cell

__all__ = ["write_csv", "write_json", "SAMPLE_COLUMNS", "COMPARISON_COLUMNS", "FAMILY_COLUMNS",
           "ReportData", "Exporter", "EXPORTERS", "export_all", "family_rows"]

#: columns of the samples CSV, in order
SAMPLE_COLUMNS = [
    "environment", "accel", "emulated", "benchmark", "params", "metric", "unit",
    "higher_is_better", "value", "valid", "warmup", "trial_id", "round", "session_index",
]
#: columns of the comparisons CSV, in order.  One interval per row, the one the verdict is
#: read off, at ``level`` (``level_kind``: ``1-alpha``, ``holm``, ``bonferroni`` or
#: ``simultaneous``, :data:`vhpc.analysis.results.LEVEL_KINDS`) by ``ratio_ci_method``: a
#: ratio's (``ratio_ci_low``/``high``, dimensionless) or, for a signed metric
#: (``welch-difference``), a difference of means' (``difference_low``/``high``, the metric's
#: unit); ``overhead_ci_low``/``high`` are that same interval as a worse-positive percentage.
COMPARISON_COLUMNS = [
    "benchmark", "params", "metric", "unit", "higher_is_better", "environment", "accel",
    "emulated", "baseline", "n", "n_baseline", "mean", "mean_baseline", "gmean",
    "gmean_baseline", "ratio", "ratio_ci_low",
    "ratio_ci_high", "difference", "difference_low", "difference_high", "overhead_pct",
    "overhead_ci_low", "overhead_ci_high", "p_value",
    "p_adjusted", "verdict", "df", "ratio_ci_method", "note", "level", "level_kind", "margin",
    "role", "family_size", "inverse_of", "runs_needed",
]

#: columns of the families CSV (one row per metric family and environment), in order
FAMILY_COLUMNS = [
    "benchmark", "params", "quantity", "unit", "higher_is_better", "primary", "secondary",
    "parameter", "points", "x_min", "x_max", "environment", "accel", "emulated", "baseline",
    "ratio", "ratio_ci_low", "ratio_ci_high", "ratio_min", "at_min", "ratio_max", "at_max",
    "overhead_pct", "overhead_ci_low", "overhead_ci_high", "verdict", "n_slower", "n_faster",
    "n_equivalent", "n_inconclusive", "n_min", "cv_max", "trust",
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
    """CSV of ``rows`` written atomically; text cells neutralised against formula injection
    (:func:`vhpc.core.text.csv_cell`), numbers left numeric."""
    fh = io.StringIO(newline="")
    w = csv.DictWriter(fh, fieldnames=columns)
    w.writeheader()
    for row in rows:
        w.writerow({k: csv_cell(_cell(v)) for k, v in row.items()})
    write_atomic(path, fh.getvalue())


def _order(analysis: Analysis):
    """Sort key of a summary/comparison (object or dict): benchmark, params and metric with
    numbers ascending numerically (``lat_128`` before ``lat_1024``), then environment in report
    order, then group (all, cold, warm as stored)."""
    rank = {e: i for i, e in enumerate(analysis.environment_order())}
    groups = {"all": 0, "cold": 1, "warm": 2}

    def key(x: Any) -> tuple:
        get = x.get if isinstance(x, dict) else (lambda k, d=None: getattr(x, k, d))
        return (get("benchmark"), natural_key(get("params") or ""), natural_key(get("metric") or ""),
                rank.get(get("environment"), len(rank)), groups.get(get("group", "all"), 3))
    return key


def comparison_rows(analysis: Analysis) -> list[dict[str, Any]]:
    """One dict per comparison with the keys of :data:`COMPARISON_COLUMNS` (ratio interval
    split into low/high, its method in ``ratio_ci_method``, the environment's accelerator), in
    report order: numbers in params and metric names ascending numerically.  ``ratio`` =
    ``gmean`` / ``gmean_baseline`` (geometric means); ``mean``/``mean_baseline`` are the
    arithmetic means, whose ratio it is only off the log scale (values ≤ 0, no gmean)."""
    rows = []
    for c in sorted(analysis.comparisons, key=_order(analysis)):
        accel, emulated = _env(analysis, c.environment)
        d = {k: getattr(c, k, None) for k in COMPARISON_COLUMNS}
        d.update(accel=accel, emulated=emulated, ratio_ci_low=c.ratio_ci[0],
                 ratio_ci_high=c.ratio_ci[1], overhead_ci_low=c.overhead_ci[0],
                 overhead_ci_high=c.overhead_ci[1], difference_low=c.difference_ci[0],
                 difference_high=c.difference_ci[1])
        rows.append(d)
    return rows


def _family_row(analysis: Analysis, fs: FamilySummary) -> dict[str, Any]:
    fam = fs.family
    accel, emulated = _env(analysis, fs.environment)
    xs = [x for x in fam.xs if x is not None]
    return {"benchmark": fam.benchmark, "params": fam.params, "quantity": fam.quantity,
            "unit": fam.unit, "higher_is_better": fam.higher_is_better, "primary": fam.primary,
            "secondary": fam.secondary, "parameter": fam.parameter or "",
            "points": len(fam.points), "x_min": min(xs) if xs else None,
            "x_max": max(xs) if xs else None, "environment": fs.environment, "accel": accel,
            "emulated": emulated, "baseline": analysis.baseline, "ratio": fs.ratio,
            "ratio_ci_low": fs.low, "ratio_ci_high": fs.high, "ratio_min": fs.ratio_min,
            "at_min": fs.x_min, "ratio_max": fs.ratio_max, "at_max": fs.x_max,
            "overhead_pct": fs.overhead_pct, "overhead_ci_low": fs.overhead_low,
            "overhead_ci_high": fs.overhead_high, "verdict": fs.verdict,
            "n_slower": fs.counts.get(SLOWER, 0), "n_faster": fs.counts.get(FASTER, 0),
            "n_equivalent": fs.counts.get(EQUIVALENT, 0),
            "n_inconclusive": fs.counts.get(INCONCLUSIVE, 0), "n_min": fs.n_min,
            "cv_max": fs.cv_max, "trust": "; ".join(fs.trust)}


def shared_points(trials: Iterable[Any]) -> list[tuple[str, str, str]]:
    """(environment, benchmark, params) whose trials put ranks of different nodes or guests
    on one host CPU (:func:`vhpc.report.scaleout.shared_cpus`); [] without trials."""
    from vhpc.report.scaleout import shared_cpus

    return [(s.environment, s.benchmark, s.params) for s in shared_cpus(trials)] if trials else []


def family_rows(analysis: Analysis, shared: Iterable[tuple[str, str, str]] = ()) -> list[dict[str, Any]]:
    """One dict per (metric family, non-baseline environment) with the keys of
    :data:`FAMILY_COLUMNS` (:mod:`vhpc.analysis.families`): for a sweep over message size
    ``ratio`` is the geometric mean of the per-size ratios, ``ratio_ci_low``/``high`` its
    conservative interval, ``ratio_min``/``ratio_max`` the extreme per-size ratios and
    ``at_min``/``at_max`` their sizes in bytes, ``n_slower``/``n_faster``/``n_no_difference``
    the per-size verdict counts, ``trust`` the notes on what limits trust ("; "-joined).
    Primary families first within each benchmark; report order otherwise.  ``shared``: see
    :func:`shared_points`."""
    return [_family_row(analysis, fs) for fs in family_summaries(analysis, shared=shared)]


def write_json(analysis: Analysis, observations: Iterable[Observation], path: str | Path,
               trials: Iterable[Any] = (), study: Mapping[str, Any] | None = None,
               shared: Iterable[tuple[str, str, str]] = ()) -> Path:
    """Write one JSON document: ``analysis.to_dict()`` plus ``"samples"`` (one object per
    observation, same fields as the samples CSV, with ``accel`` and ``emulated``) and
    ``"rank_placement"``: for each stored MPI trial, every rank's CPUs as read back (and, in a
    multi-guest ``vcluster``, its guest and vCPU).

    ``"families"``: :func:`family_rows` (with ``"x"``: the points, ascending — bytes for a
    size sweep, the parameter's values for a parameter sweep — and per point its
    ``"point_params"`` and ``"metrics"`` name).  Summaries and comparisons are listed in report order
    (numbers in params and metric names ascending numerically).

    Strict JSON (NaN/inf written as null).  Returns the path; raises OSError when it cannot be
    written.
    """
    doc = analysis.to_dict()
    key = _order(analysis)
    doc["summaries"] = sorted(doc["summaries"], key=key)
    doc["comparisons"] = sorted(doc["comparisons"], key=key)
    fams = []
    for fs in family_summaries(analysis, shared=shared):
        row = _family_row(analysis, fs)
        row["x"] = [x for x in fs.family.xs if x is not None]
        row["point_params"] = [p for _, p, _ in fs.family.points]
        row["metrics"] = fs.family.metrics
        fams.append(row)
    doc["families"] = json_ready(fams)
    doc["samples"] = [_sample_row(analysis, o) for o in observations]
    doc["rank_placement"] = [
        {"environment": t.environment, "benchmark": t.benchmark, "params": t.params,
         "round": t.round, "ranks": t.applied.ranks}
        for t in trials if getattr(t.applied, "ranks", None)]
    if study:
        doc["study"] = dict(study)  # {"name", "figure": x/y/interval per point, "paper_findings"}
    path = Path(path)
    write_atomic(path, json.dumps(doc, allow_nan=False, indent=1) + "\n")
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
    #: what every page states beside the answer (report.pagefacts): ``sizes`` (benchmark[params]
    #: → resolved parameters), ``load`` (this host's load around the trials, or None)
    facts: Mapping[str, Any] = field(default_factory=dict)


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
class _FamiliesCsv:
    name: str = "families-csv"
    filename: str = "families.csv"

    def write(self, data: ReportData, path: Path) -> Path:
        _write_rows(path, FAMILY_COLUMNS, family_rows(data.analysis, shared_points(data.trials)))
        return Path(path)


@dataclass(frozen=True)
class _Json:
    name: str = "json"
    filename: str = "results.json"

    def write(self, data: ReportData, path: Path) -> Path:
        return write_json(data.analysis, data.observations, path, data.trials, data.study,
                          shared=shared_points(data.trials))


@dataclass(frozen=True)
class _Html:
    name: str = "html"
    filename: str = "report.html"

    def write(self, data: ReportData, path: Path) -> Path:
        from vhpc.report.html import write_html

        return write_html(data.analysis, data.observations, path, data.campaign,
                          sections=data.sections, study=data.study_html,
                          shared=shared_points(data.trials), facts=data.facts)


#: every exporter by name, in the order :func:`export_all` writes them
EXPORTERS: dict[str, Exporter] = {e.name: e for e in (_Html(), _SamplesCsv(), _ComparisonsCsv(),
                                                      _FamiliesCsv(), _Json())}


def export_all(data: ReportData, folder: str | Path,
               paths: Mapping[str, str | Path | None] | None = None) -> dict[str, Path]:
    """Write every format of :data:`EXPORTERS` into ``folder`` (created if missing) under its
    default file name, or at ``paths[name]`` when given.  Returns name → path written; raises
    OSError when a file cannot be written."""
    from vhpc.core.paths import private_results

    folder = Path(folder)
    out = {}
    with private_results():  # reports hold raw outputs and host facts: 0600 unless shared
        report_folder(folder)
        for name, exporter in EXPORTERS.items():
            target = (paths or {}).get(name)
            out[name] = exporter.write(data, Path(target) if target else folder / exporter.filename)
    return out


def report_folder(folder: str | Path) -> Path:
    """Create the report folder ``folder`` (parents too) and return it; refuse one that is a
    symbolic link (a planted link would carry the report elsewhere): ReportPathError."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if folder.is_symlink():
        raise ReportPathError(f"{folder} is a symbolic link: vhpc does not write reports "
                              "through it (remove it, or give --html/--csv/--json)")
    return folder


def check_writable(path: str | Path | None, flag: str) -> None:
    """Refuse, before any work, an output path given with ``flag`` that vhpc must not or
    cannot write (:func:`vhpc.core.paths.check_output`: a device, FIFO, socket, symbolic link
    or folder in its place, its folder missing or not writable); ``-`` (standard output) is
    fine.  Raises OutputPathError (one line)."""
    if not path or str(path) == "-":
        return
    check_output(path, flag)
