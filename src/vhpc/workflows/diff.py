"""``vhpc diff A B``: campaign against campaign (docs/diff.md) — the sub-command's flags, the
stores it reads (never creating one), the tolerance, and the history of campaigns of the same
spec drawn beside the diff."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from vhpc.core.argtypes import number
from vhpc.core.errors import VhpcError
from vhpc.core.text import markup as esc
from vhpc.workflows.common import (UsageError, campaign_flags, console, count, err_console,
                                   margin_flag)


def add_parser(sub) -> None:
    """``vhpc diff A B`` and its flags (docs/diff.md)."""
    d = sub.add_parser("diff", help="campaign against campaign: did the overhead change, and "
                       "what changed on the host (exit 1 on a regression beyond --tolerance)")
    d.add_argument("a", metavar="A", help="campaign id before (e.g. before the update)")
    d.add_argument("b", metavar="B", help="campaign id after")
    d.add_argument("--store", action="append", metavar="PATH",
                   help="vhpc.db or results folder of A (and of B unless given twice: the "
                        "second is B's); default: --out")
    d.add_argument("--tolerance", metavar="PCT|FILE",
                   help="how much the overhead may grow: '5%%', or a file of 'PATTERN PCT' "
                        "lines (benchmark/metric shell patterns, '*' default) → PASS/FAIL, "
                        "exit 1 on a regression beyond it")
    d.add_argument("--alpha", type=number(0, 1, lo_open=True, hi_open=True), default=0.05,
                   help="significance level, Holm-corrected over the diff (default %(default)s)")
    d.add_argument("--history", type=count(2, 1000), metavar="N",
                   help="also draw the ratio over the last N campaigns of the same spec "
                        "(up to B) in the HTML")
    d.add_argument("--html", help="HTML path (default OUT/diff-A-B/diff.html)")
    d.add_argument("--json", help="JSON path (default OUT/diff-A-B/diff.json)")
    campaign_flags(d)
    margin_flag(d, intervals=False)  # diff's model has its own family


#: Largest --tolerance file read (bytes): a few lines of PATTERN PERCENT.
MAX_TOLERANCE = 1 << 20


def _tolerance_text(path: str) -> str:
    """The text of the ``--tolerance`` file ``path`` (a file or a pipe) of at most
    :data:`MAX_TOLERANCE` bytes, UTF-8.  Raises DiffError (one line) otherwise."""
    from vhpc.analysis.diff import DiffError
    from vhpc.core.paths import read_small_text

    try:
        return read_small_text(path, MAX_TOLERANCE, f"--tolerance {path}",
                               "give a file of 'PATTERN PERCENT' lines or a percentage",
                               regular_only=False)
    except ValueError as exc:
        raise DiffError(str(exc)) from None


def store_file(path: str) -> Path:
    """The store file ``path`` names: itself when it is a ``.db`` or a file, else the results
    folder's ``vhpc.db``."""
    p = Path(path)
    return p if p.suffix == ".db" or p.is_file() else p / "vhpc.db"


def open_existing_store(path: str):
    """The store at ``path`` (:func:`store_file`); it must exist (a diff or a history never creates
    an empty store).  Raises DiffError naming ``path`` when there is none."""
    from vhpc.analysis.diff import DiffError
    from vhpc.store import Store

    db = store_file(path)
    if not db.is_file():
        raise DiffError(f"no vhpc store at {db}: give the results folder (--out) or the "
                        "vhpc.db of the campaigns (--store)")
    return Store(db, existing=True)


def own_folder(folder: Path) -> None:
    """Make the diff (or history) folder ``folder``, or accept it when it is a real folder of
    this user's: its name is predictable, so one that is a symbolic link or belongs to someone
    else (a shared results folder) is refused rather than written into (raises DiffError, also
    when the folder cannot be made)."""
    from vhpc.analysis.diff import DiffError

    try:
        folder.mkdir(parents=True, exist_ok=True)
        st = os.lstat(folder)
    except OSError as exc:
        raise DiffError(f"cannot make the diff folder {folder}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise DiffError(f"{folder} is a symbolic link or not a folder: vhpc does not write "
                        "through it (remove it, or give --html and --json)")
    if st.st_uid != os.geteuid():
        raise DiffError(f"{folder} belongs to another user (uid {st.st_uid}): vhpc does not "
                        "write into it (remove it, or give --html and --json)")


def run(args) -> int:
    """``vhpc diff A B``: campaign against campaign, overhead changes with PASS/FAIL against
    a tolerance (docs/diff.md).  Exit 0 all within, 1 a regression beyond it, 2 bad input or
    a tolerance with nothing to check (:attr:`vhpc.analysis.diff.Diff.outcome`).  Raises
    UsageError when ``--store`` is given more than twice, DiffError for a store that
    is not there."""
    from vhpc.analysis import diff as d
    from vhpc.report import diff as present

    from vhpc.report.export import check_writable

    for flag in ("html", "json"):
        check_writable(getattr(args, flag), f"--{flag}")
    paths = args.store or [args.out]
    if len(paths) > 2:
        raise UsageError("vhpc diff: give --store at most twice (the store of A, then of B)")
    stores = [open_existing_store(p) for p in paths]
    a, b = d.load(stores[0], args.a), d.load(stores[-1], args.b)
    tol = None
    if args.tolerance is not None:
        if Path(args.tolerance).is_file():
            tol = d.parse_tolerance_file(_tolerance_text(args.tolerance), args.tolerance)
        else:
            tol = d.Tolerance(d.parse_percent(args.tolerance, "--tolerance"))
    margin = args.margin if getattr(args, "margin", None) is not None else \
        b.spec.get("margin", d.DEFAULT_MARGIN)
    result = d.diff(a, b, alpha=args.alpha, tolerance=tol, margin=margin)
    hist = None
    if args.history:
        found: dict[str, d.CampaignData] = {}
        for st in stores:
            for row in st.campaigns():
                cid = row["id"]
                if cid in found or row["created"] > b.created:
                    continue
                try:
                    if d.same_spec(st.campaign(cid)["spec"], b.spec):
                        found[cid] = d.load(st, cid)
                except VhpcError as exc:  # an unreadable old campaign: left out, said so
                    err_console.print(f"vhpc: history: {cid} left out ({exc})", markup=False,
                                      highlight=False, soft_wrap=True)
        found.setdefault(a.id, a)
        found.setdefault(b.id, b)
        chosen = sorted(found.values(), key=lambda c: c.created)[-args.history:]
        hist = d.history(chosen, args.alpha)
    present.render_terminal(result, console)
    folder = Path(args.out) / f"diff-{a.id}-{b.id}"
    if not (args.html and args.json):
        own_folder(folder)
    html = present.write_html(result, Path(args.html) if args.html else folder / "diff.html", hist)
    js = present.write_json(result, Path(args.json) if args.json else folder / "diff.json", hist)
    console.print(f"Diff: [bold]{esc(html)}[/]  (JSON: {esc(js)})")
    return result.exit_status
