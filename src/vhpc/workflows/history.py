"""``vhpc history``: overhead over time across many campaigns (docs/history.md) — the
sub-command's flags, the stores it reads (never creating one), the filters, the change points,
the CI gate (``--check``, ``--junit``) and the pages it writes."""

from __future__ import annotations

import datetime
from pathlib import Path

from vhpc.core.argtypes import number, percent
from vhpc.workflows.common import campaign_flags, console, err_console


def _when(text: str, end_of_day: bool = False) -> float:
    """argparse type of ``--since``/``--until``: an ISO date or date-time (local time) →
    Unix seconds; a bare date with ``end_of_day`` is the last second of that day (``--until``
    takes the whole day)."""
    import argparse

    try:
        t = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a date: give YYYY-MM-DD or YYYY-MM-DDTHH:MM") from None
    if end_of_day and len(text.strip()) == 10:
        t += datetime.timedelta(days=1, microseconds=-1)
    return t.timestamp()


def _until(text: str) -> float:
    return _when(text, end_of_day=True)


def add_parser(sub) -> None:
    """``vhpc history`` and its flags (docs/history.md)."""
    h = sub.add_parser("history", help="overhead over time across campaigns: change points at "
                       "a stated false-alarm rate, what changed at each, and a CI gate (--check: "
                       "exit 1 on a regression beyond the margin)")
    h.add_argument("--store", action="append", metavar="PATH",
                   help="vhpc.db or results folder to read (repeat for several, e.g. a "
                        "cluster's shared store); default: --out")
    h.add_argument("--benchmark", "-b", action="append", default=[], metavar="PATTERN",
                   help="only these benchmarks (shell pattern, repeatable)")
    h.add_argument("--environment", "-e", action="append", default=[], metavar="PATTERN",
                   help="only these environments (shell pattern, repeatable)")
    h.add_argument("--since", type=_when, metavar="DATE", help="only campaigns from DATE on")
    h.add_argument("--until", type=_until, metavar="DATE",
                   help="only campaigns up to DATE (a bare date: to its end)")
    h.add_argument("--campaign", action="append", default=[], metavar="ID",
                   help="only these campaigns (repeatable; e.g. a model and the latest)")
    h.add_argument("--alpha", type=number(0, 1, lo_open=True, hi_open=True), default=0.05,
                   help="false-alarm rate per series of the change points, and the gate's "
                        "level, Holm over the series (default %(default)s)")
    h.add_argument("--margin", type=percent(0, 1000), default=0.05, metavar="PCT",
                   help="how much the overhead may grow before --check fails (default 5%%)")
    h.add_argument("--check", action="store_true",
                   help="CI gate: judge the latest campaign of each series against the earlier "
                        "ones since their last change point; exit 1 on a regression beyond "
                        "--margin, 2 when nothing could be checked")
    h.add_argument("--junit", metavar="FILE", help="with --check: write the gate as JUnit XML")
    h.add_argument("--permutations", type=number(99, 100000), default=199, metavar="R",
                   help="permutations per change-point test above 8 campaigns (default "
                        "%(default)s)")
    h.add_argument("--html", help="HTML path (default OUT/history/history.html)")
    h.add_argument("--json", help="JSON path (default OUT/history/history.json)")
    campaign_flags(h)


def run(args) -> int:
    """``vhpc history``: exit 0, or with ``--check`` 1 on a regression beyond the margin and 2
    when nothing could be checked (:attr:`vhpc.analysis.history.History.exit_status`).  Raises
    HistoryError for ``--junit`` without ``--check``, or ``--since`` after ``--until``."""
    from vhpc.analysis import history as hist
    from vhpc.report import history as present
    from vhpc.report.export import check_writable
    from vhpc.workflows.diff import open_existing_store, own_folder, store_file

    if args.junit and not args.check:
        raise hist.HistoryError("--junit writes the gate's result: give --check with it")
    for flag in ("html", "json", "junit"):
        check_writable(getattr(args, flag), f"--{flag}")
    if args.since is not None and args.until is not None and args.since > args.until:
        raise hist.HistoryError("--since is after --until: give a window that holds campaigns")
    paths: dict[Path, str] = {}  # one connection per store file: a store given twice is read once
    for p in args.store or [args.out]:
        paths.setdefault(store_file(p).resolve(), p)
    stores = [open_existing_store(p) for p in paths.values()]
    filters = hist.Filters(tuple(args.benchmark), tuple(args.environment), args.since,
                           args.until, tuple(args.campaign))
    skipped: list[str] = []
    campaigns = hist.gather(stores, filters, skipped)
    h = hist.build(campaigns, filters, args.alpha, args.margin, int(args.permutations),
                   skipped=skipped)
    if args.check:
        h.check()
    present.render_terminal(h, console)
    folder = Path(args.out) / "history"
    if not (args.html and args.json):
        own_folder(folder)
    html = present.write_html(h, Path(args.html) if args.html else folder / "history.html")
    js = present.write_json(h, Path(args.json) if args.json else folder / "history.json")
    console.print(f"History: {html}  (JSON: {js})", markup=False, highlight=False)
    if args.junit:
        junit = present.write_junit(h, Path(args.junit))
        err_console.print(f"JUnit: {junit}", markup=False, highlight=False)
    return h.exit_status
