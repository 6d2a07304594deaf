"""What the report writes beside a ratio: the environments' centres with their units
(geometric means, the ones the ratio divides), an environment's label (the image it boots),
and when an interval is shown as numbers.  Shared by the terminal and the HTML report through
:mod:`vhpc.report`; imports only :mod:`vhpc.core` and :mod:`vhpc.analysis`."""

from __future__ import annotations

import math

from vhpc.analysis import EQUIVALENT, FASTER, SLOWER, Analysis
from vhpc.analysis.families import Family
from vhpc.core import intervals, numfmt

__all__ = ["WIDER", "interval_hidden", "fmt_value", "family_centre", "fmt_centre", "env_label"]

#: said beside "mean ± half-width" when the half-width exceeds the mean: the interval reaches
#: below zero for a positive quantity, the runs disagree too much to tell its size
WIDER = "interval wider than the mean"


def interval_hidden(n_min: int, low: float | None, high: float | None, verdict: str) -> bool:
    """:func:`vhpc.core.intervals.interval_hidden` for a comparison whose verdict is
    ``verdict``: a decided one (slower, faster, equivalent) keeps its interval."""
    return intervals.interval_hidden(n_min, low, high, verdict in (SLOWER, FASTER, EQUIVALENT))


def fmt_value(value: float | None) -> str:
    """A measured value (metric unit) with 4 significant digits: "0.2947", "77.46", "12,346"
    from 10,000 on, compact scientific form below 0.001 and from 10⁹ on; "—" when unknown."""
    if value is None or not math.isfinite(value):
        return "—"
    if value != 0 and not 1e-3 <= abs(value) < 1e9:
        return numfmt.sci(value)
    if abs(value) >= 1e4:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def family_centre(analysis: Analysis, fam: Family, env: str) -> float | None:
    """The centre of ``env`` over the family whose ratio the headline shows: the geometric
    mean over its points of each point's geometric mean (one point: that geometric mean), so
    centre / baseline's centre is the family's ratio; the arithmetic means alike where a
    point has no geometric mean (a value ≤ 0); None when a point has no value."""
    xs = []
    for _, p, m in fam.points:
        s = analysis.summary(fam.benchmark, p, m, env)
        v = None if s is None else (s.gmean if s.gmean is not None else s.mean)
        if v is None or not v > 0:
            return None if len(fam.points) > 1 or v is None else v
        xs.append(v)
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt_centre(value: float | None, unit: str) -> str:
    """"77.46 us": a centre (:func:`fmt_value`) with its unit ("1" and "" left out)."""
    text = fmt_value(value)
    return text if text == "—" or unit in ("", "1") else f"{text} {unit}"


def env_label(analysis: Analysis, env: str) -> str:
    """The environment as a reader knows it: its name, and the image it boots when it boots a
    user's image (``vm:bench.qcow2``; the file's name from the stored fingerprint) and the
    name does not say it already (a user's ``name=`` that names it stays as given)."""
    info = analysis.environments.get(env)
    image = (info.fingerprint or {}).get("image") if info is not None else None
    return image_label(env, image.get("path") if isinstance(image, dict) else None)


def image_label(env: str, path) -> str:
    """``env`` with the file name of the image ``path`` it boots (``vm:bench.qcow2``), unless
    the name says it already; ``env`` when there is none: the one rule of :func:`env_label`,
    also for a plan, whose environments have booted nothing yet (the ``image=`` option)."""
    if not isinstance(path, str) or not path:
        return env
    base = path.rstrip("/").rsplit("/", 1)[-1]
    return env if base in env else f"{env}:{base}"
