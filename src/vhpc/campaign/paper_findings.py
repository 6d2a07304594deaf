"""What the seed papers found, as data, and whether this host agrees.

``findings.yaml`` beside this module holds, per study, the seed statements that carry a number
or a direction, each quoted verbatim with its seed file and section or figure.  :func:`verdict`
sets one statement beside a measurement: the VM/native ratio of the statement's metric, in the
"worse is higher" sense (ratio > 1: the VM is slower, whatever the metric's direction), with its
confidence interval.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Callable
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from vhpc.core import logratio, numfmt, power
from vhpc.core.errors import VhpcError

AGREES, DISAGREES, CANNOT_TELL = "agrees", "disagrees", "cannot tell"
#: Fewest valid samples per side for a verdict (a t interval from 2 samples is too wide to
#: contradict anything; the seeds used 30 to 50 repeats).
MIN_SAMPLES = 3


class FindingsError(VhpcError):
    """The findings file is malformed; the message names the entry and the field."""


Group = Literal["all", "cold", "warm"]


def matches(pattern: str | None, name: str) -> bool:
    """True when ``name`` matches ``pattern``: fnmatch patterns separated by ``|``
    (``npb-cg|npb-is``, ``optime_*``); None matches everything."""
    return pattern is None or any(fnmatch.fnmatchcase(name, p.strip()) for p in pattern.split("|"))


class Finding(BaseModel):
    """One stated result: ``study``, ``seed`` (file name), ``where`` (section/figure),
    ``quote`` (verbatim), ``metric`` (vhpc metric pattern, :func:`matches`; None: any),
    ``claim`` and its values: ``overhead_pct``: ``value`` ± ``tolerance`` percentage points;
    ``direction``: ``expect`` (``no-difference`` within ``tolerance`` percent when given, else
    the campaign's margin); ``within_pct``: ``value`` percent.

    What is compared: ``benchmark`` and ``environment`` (patterns; None: every benchmark, every
    environment but the reference) in trial ``group`` (``all``, ``cold``: first trial after a
    boot, ``warm``: later ones) against ``versus`` (an environment name; None: the campaign's
    baseline; ``self``: the same environment) in ``versus_group``.

    How the paper measured it: ``sizes`` (bytes, low and high) the message sizes its figure
    plots: a metric swept over sizes (``optime_<size>``) is summarised over the measured sizes
    in that range (the geometric mean of the per-size ratios, :mod:`vhpc.analysis.families`),
    not matched size by size; ``terms``: the paper's claim in its own words (``co-run slower
    than alone``), shown instead of :meth:`stated`'s generic ``VM slower``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    study: str = Field(min_length=1)
    seed: str = Field(pattern=r"^\d{3}_[0-9a-f]+\.txt$")
    where: str = Field(min_length=1)
    quote: str = Field(min_length=10)
    metric: str | None = None
    benchmark: str | None = None
    environment: str | None = None
    group: Group = "all"
    versus: str | None = None
    versus_group: Group = "all"
    claim: Literal["overhead_pct", "direction", "within_pct"]
    value: float | None = None
    tolerance: float | None = Field(None, ge=0)
    expect: Literal["slower", "faster", "no-difference"] | None = None
    sizes: tuple[int, int] | None = None
    terms: str | None = Field(None, min_length=3)

    @model_validator(mode="after")
    def _values(self):
        need = {"overhead_pct": ("value", "tolerance"), "direction": ("expect",),
                "within_pct": ("value",)}[self.claim]
        missing = [k for k in need if getattr(self, k) is None]
        if missing:
            raise ValueError(f"claim {self.claim} needs {', '.join(missing)}")
        if self.sizes is not None and not 0 < self.sizes[0] <= self.sizes[1]:
            raise ValueError("sizes needs 0 < low <= high (bytes)")
        if self.versus == "self" and self.group == self.versus_group:
            raise ValueError("versus self needs group and versus_group to differ")
        return self

    @property
    def against_baseline(self) -> bool:
        """True when the statement compares whole environments with the baseline (the
        campaign's comparisons answer it directly)."""
        return self.versus is None and self.group == "all" and self.versus_group == "all"

    def stated(self) -> str:
        """The paper's value in a few words (``31 % ± 15``, ``slower``, ``within 5 %``)."""
        if self.claim == "overhead_pct":
            return f"{self.value:g} % overhead (± {self.tolerance:g})"
        if self.claim == "within_pct":
            return f"within {self.value:g} % of native"
        if self.terms:
            return self.terms
        return {"slower": "VM slower", "faster": "VM faster",
                "no-difference": "no difference found"}[self.expect]


def parse(text: str, name: str = "findings.yaml") -> tuple[Finding, ...]:
    """The statements in ``text`` (a YAML list).  Raises FindingsError (one line)."""
    try:
        rows = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FindingsError(f"{name}: not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(rows, list):
        raise FindingsError(f"{name}: expected a list of statements")
    out = []
    for i, row in enumerate(rows):
        try:
            out.append(Finding.model_validate(row))
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "entry"
            raise FindingsError(f"{name}: statement {i}: {field}: "
                                f"{err['msg'].removeprefix('Value error, ')}") from None
    return tuple(out)


@functools.lru_cache(maxsize=1)
def load() -> tuple[Finding, ...]:
    """Every statement shipped with vhpc (package data).  Raises FindingsError."""
    text = (resources.files("vhpc.campaign") / "findings.yaml").read_text(encoding="utf-8")
    return parse(text)


def for_study(name: str) -> list[Finding]:
    """The statements of study ``name`` (possibly none), in file order."""
    return [f for f in load() if f.study == name]


def verdict(finding: Finding, ratio: float | None, ci: tuple[float, float] | None, n: int,
            emulated: bool, placement_ok: bool = True, linear: bool = False,
            margin: float = 0.05, runs: int | None = None, higher_is_better: bool = False,
            plan: Callable[[float], int | None] | None = None) -> tuple[str, str]:
    """(``agrees`` | ``disagrees`` | ``cannot tell``, reason) for ``finding`` against a measured
    VM/native ``ratio`` (> 1: VM worse) with confidence interval ``ci`` from ``n`` samples per
    side (the table's row: its interval at the row's level, the one interval the line reads).
    Cannot tell: fewer than :data:`MIN_SAMPLES`, TCG emulation (its overhead does not
    describe hardware virtualization), a placement this host could not make, or no interval
    (``linear``: a signed metric, compared by the difference of means: ``ratio`` and ``ci``
    are 1 + its worse-positive difference relative to the baseline's |mean|, as the table's
    overhead, and the no-difference band is the table's [1 − m, 1 + m] on that scale).

    Decided by the table's own decision for the line's own band ``b``
    (:func:`vhpc.core.logratio.decide`, :func:`~vhpc.core.logratio.decide_difference` for
    ``linear``), never by a looser reading: ``direction`` slower / faster: the table's
    ``slower`` / ``faster`` (b = ``margin``); ``no-difference``: the table's ``equivalent``
    within the paper's ``tolerance`` percent, else ``margin`` (a ``slower`` / ``faster`` row is a
    difference the paper did not find: disagrees, however small); ``within_pct`` v: the interval
    inside [1/(1 + v/100), 1 + v/100], the band's equivalence (TOST), which holds for a
    ``slower`` / ``faster`` row inside it too (:func:`~vhpc.core.logratio.within_margin`);
    ``overhead_pct`` V ± T: the overhead interval (ratio − 1)·100 inside [V − T, V + T].  An
    interval wholly outside the claim disagrees; the rest cannot tell, with the runs that
    would decide for the line's own band: ``plan(b)`` (runs a side,
    :func:`vhpc.core.logratio.runs_to_decide` at that band), else ``runs`` when the band is the
    table's margin (the table's :attr:`~vhpc.analysis.Comparison.runs_needed`), else no plan.
    The reason shows the ratio as the page does, environment / reference in the metric's
    own sense (``higher_is_better``: the reciprocal of ``ratio``), one orientation per line."""
    if n < MIN_SAMPLES:
        return CANNOT_TELL, f"too few runs ({n} < {MIN_SAMPLES})"
    if emulated:
        return CANNOT_TELL, "TCG emulation, not hardware virtualization"
    if not placement_ok:
        return CANNOT_TELL, "this host cannot make the paper's placement"
    if ratio is None or ci is None or None in ci:
        return CANNOT_TELL, "no confidence interval"
    lo, hi = ci
    band = margin
    got = _got(ratio, lo, hi, linear, higher_is_better)
    if finding.claim == "overhead_pct":
        want_lo = finding.value - finding.tolerance
        want_hi = finding.value + finding.tolerance
        o_lo, o_hi = (lo - 1) * 100, (hi - 1) * 100
        read = INSIDE if want_lo <= o_lo and o_hi <= want_hi else \
            OUTSIDE if o_hi < want_lo or o_lo > want_hi else ACROSS
        got = numfmt.cost_ci(ratio, lo, hi)
    elif finding.claim == "within_pct" or finding.expect == "no-difference":
        pct = finding.value if finding.claim == "within_pct" else finding.tolerance
        band = (pct if pct is not None else margin * 100) / 100
        seen = _decision(lo, hi, band, linear)
        floor = 1 - band if linear else 1 / (1 + band)
        outside = lo > 1 + band or hi < floor
        if finding.claim == "within_pct":
            inside = seen == logratio.EQUIVALENT or (
                seen in (logratio.WORSE, logratio.BETTER) and _inside(lo, hi, band, linear))
            read = INSIDE if inside else OUTSIDE if outside else ACROSS
        else:  # no difference found: the table's equivalent; a difference it sees disagrees
            read = INSIDE if seen == logratio.EQUIVALENT else \
                ACROSS if seen == logratio.UNDECIDED else OUTSIDE
            got += ": " + ({logratio.EQUIVALENT: f"equivalent within ±{band * 100:g} %",
                            logratio.UNDECIDED: f"not decided within ±{band * 100:g} %"}.get(seen)
                           or _SEEN[seen])
    else:  # the table's slower / faster, read off the same interval
        seen = _decision(lo, hi, margin, linear)
        said = _SEEN.get(seen, "no-difference")
        read = INSIDE if said == finding.expect else \
            OUTSIDE if seen in (logratio.WORSE, logratio.BETTER) else ACROSS
        got = f"{got}: {said}"
    if read == INSIDE:
        return AGREES, got
    if read == OUTSIDE:
        return DISAGREES, got
    if plan is not None:
        runs = plan(band)
    elif band != margin:
        runs = None  # the table's plan is for its own margin, not this band
    return CANNOT_TELL, f"{got}; {runs_to_decide(runs, n)}"


#: the table's difference outcomes in the findings' words
_SEEN = {logratio.WORSE: "slower", logratio.BETTER: "faster"}


def _inside(lo: float, hi: float, band: float, linear: bool) -> bool:
    """Whether the worse-is-higher interval [lo, hi] lies in the band, as the table's
    equivalence reads it (:func:`vhpc.core.logratio.within_margin`; ``linear``: [1 − band,
    1 + band]), whether or not it also excludes 1."""
    return -band <= lo - 1 and hi - 1 <= band if linear else logratio.within_margin(lo, hi, band)


def _decision(lo: float, hi: float, band: float, linear: bool) -> str:
    """The table's decision (:func:`vhpc.core.logratio.decide`; ``linear``: of the relative
    difference, :func:`~vhpc.core.logratio.decide_difference`) for the worse-is-higher
    interval [lo, hi] at ``band``."""
    if linear:
        return logratio.decide_difference(lo - 1, hi - 1, band)
    return logratio.decide(lo, hi, band)


def _got(ratio: float, lo: float, hi: float, linear: bool, higher_is_better: bool = False) -> str:
    """The measured interval in words: a ratio as the page shows it (environment / reference
    in the metric's own sense: the reciprocal of the worse-is-higher ``ratio`` for a metric
    where higher is better), or a signed metric's overhead (its difference relative to the
    baseline's |mean|)."""
    if linear:
        return f"overhead {numfmt.pct_ci((ratio - 1) * 100, (lo - 1) * 100, (hi - 1) * 100)}"
    if higher_is_better:
        ratio, lo, hi = 1 / ratio, 1 / hi, 1 / lo
    return f"ratio {numfmt.ratio_ci(ratio, lo, hi)}"


#: how an interval lies against a claim's range
INSIDE, OUTSIDE, ACROSS = "inside", "outside", "across"


def runs_to_decide(runs: int | None, n: int) -> str:
    """The runs that would decide, in words (:func:`vhpc.core.power.plan_text`): the plan
    with its probability, the pilot advice from fewer than :data:`vhpc.core.power.MIN_PILOT`
    runs a side, or why there is no plan."""
    return power.plan_text(runs, n)
