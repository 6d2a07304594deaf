"""Third hostile battery, part B: foreign text is data everywhere it is shown —
never rich markup, matplotlib math text, a spreadsheet formula or a terminal escape; files
are written by create-new + atomic rename and never through a symlink; finite extremes give
a result or an honest "cannot compute"; a slowdown the kernel did not apply is a finding.
Real CLI runs in-process (tiny custom campaigns printing a fixed line), real files."""

from __future__ import annotations

import csv
import errno
import json
import math
import os
import sqlite3
import sys
from pathlib import Path

import pytest
import yaml

from vhpc import cli
from vhpc.core import paths
from vhpc.core.text import csv_cell, markup, mathtext, plain

ESC = "\x1b"


# ------------------------------------------------------------------------------ helpers

def run_cli(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def campaign_file(path: Path, lines: str, unit: str = "1", regex: str = r"v (-?\d+)",
                  envs=("native",), exit_status: int = 0, repeats: int = 2) -> Path:
    """A campaign file of one custom benchmark ``probe`` that prints ``lines`` (a printf
    format) and exits ``exit_status``; metric ``v`` with ``unit``."""
    probe = {"name": "probe",
             "command": ["sh", "-c", f"printf '{lines}'; exit {exit_status}"],
             "metrics": [{"name": "v", "regex": regex, "unit": unit, "higher_is_better": True}]}
    doc = {"custom": [probe], "benchmarks": ["probe"], "environments": list(envs),
           "warmup": 0, "repeats": repeats}
    path.write_text(yaml.safe_dump(doc))
    return path


def campaign_ids(out: Path) -> list[str]:
    db = sqlite3.connect(out / "vhpc.db")
    try:
        return [r[0] for r in db.execute("SELECT id FROM campaigns ORDER BY created, id")]
    finally:
        db.close()


def statuses(out: Path) -> list[str]:
    db = sqlite3.connect(out / "vhpc.db")
    try:
        return [r[0] for r in db.execute("SELECT status FROM trials")]
    finally:
        db.close()


# ---------------------------------------------------------------- 1. rich markup, ANSI

def test_markup_and_escapes_in_output_command_and_out_path_are_text(capsys, tmp_path,
                                                                   monkeypatch):
    """A failing benchmark printing ``[/y]`` and ANSI escapes, a command line and an
    ``--out`` path holding ``[/x]``: the campaign ends normally (no trial left running), the
    text is shown literally without escapes, and ``list campaigns`` reads the store."""
    out = tmp_path / "o[/x]"
    f = campaign_file(tmp_path / "c.yaml", r"[/y] \033[31mred\033[0m\n", exit_status=3,
                      regex=r"(?:\[/y\] )?v (\d+)", repeats=1)  # not found: the note quotes it
    monkeypatch.setattr(sys, "argv", ["vhpc[/y]", "run", str(f), "--out", str(out)])
    rc, so, se = run_cli(capsys, "run", f, "--out", out)
    assert rc == 1, se[-2000:]  # every trial failed (exit 3): stored, campaign finished
    assert set(statuses(out)) == {"failed"}
    assert "[/x]" in so  # the path: as text
    db = sqlite3.connect(out / "vhpc.db")  # the note quotes the output literally
    try:
        errors = " ".join(r[0] or "" for r in db.execute("SELECT error FROM trials"))
    finally:
        db.close()
    assert "/y" in errors and "not found" in errors, errors
    assert ESC + "[31m" not in so + se and ESC + "[2J" not in so + se
    rc, so, se = run_cli(capsys, "list", "campaigns", "--out", out)
    assert rc == 0, se
    assert "vhpc[/y]" in so and "[/x]" in so


def test_a_parameter_holding_markup_runs_and_reports(capsys, tmp_path):
    """``pagefault:file=.../d[/y]``: a parameter with a closing tag in it."""
    (tmp_path / "d[").mkdir()
    target = tmp_path / "d[" / "y]"
    target.write_bytes(b"\0" * 65536)
    rc, so, se = run_cli(capsys, "compare", "-b", f"pagefault:file={target},mib=1",
                         "-e", "native", "--repeats", "2", "--warmup", "0",
                         "--out", tmp_path / "out")
    assert rc == 0, se[-2000:]
    assert "d[/y]" in so


def test_the_progress_line_and_store_rows_are_never_markup():
    """The progress bar's description and ``list campaigns`` rows (the views themselves)."""
    import io

    from rich.console import Console

    from vhpc.report import console as views
    from vhpc.workflows.common import RichProgress, safe_console

    buf = io.StringIO()
    con = safe_console(Console(file=buf, width=200, force_terminal=True))
    bar = RichProgress(con)

    class Row:
        environment, benchmark, warmup, round = "e[/a]", "b[bold]", False, 1
    bar.start(2, 0)
    bar.trial(Row)
    bar.finished(Row, "failed", "[/z] boom " + ESC + "]0;title\a " + ESC + "[2J\nmore")
    bar.stop()
    views.campaigns(con, [{"id": "c[/i]", "status": "s[/s]", "done": 1, "failed": 0,
                           "total": 1, "command": "vhpc run x --out [/x] " + ESC + "[2J"}],
                    "w[/w]")
    text = buf.getvalue()
    for literal in ("e[/a]", "b[bold]", "[/z] boom", "c[/i]", "[/x]", "w[/w]"):
        assert literal in text, literal
    assert ESC + "[2J" not in text and ESC + "]0;" not in text


def test_text_helpers():
    assert plain("a" + ESC + "[31mb" + ESC + "[0m\tc\n\x07" + ESC + "]0;t\x07d") == "ab\tc\nd"
    assert markup("[/y]") == "\\[/y]"
    assert mathtext(r"$\foo$") == r"\$\foo\$"


# -------------------------------------------------------------------- 2. math text

def test_a_math_text_unit_is_drawn_literally(capsys, tmp_path):
    """A metric unit ``$\\foo$`` (an unknown math symbol): the report and its figures are
    written, the unit shown as typed."""
    f = campaign_file(tmp_path / "c.yaml", r"v 3\n", unit=r"$\foo$",
                      envs=("native", "native:name=b"))
    out = tmp_path / "out"
    rc, so, se = run_cli(capsys, "run", f, "--out", out)
    assert rc == 0, se[-2000:]
    (cid,) = campaign_ids(out)
    rc, so, se = run_cli(capsys, "report", cid, "--out", out)
    assert rc == 0, se[-2000:]
    assert r"$\foo$" in so  # the terminal: as typed
    page = (out / cid / "report.html").read_text()
    assert r"$\foo$" in page and r"\$\foo\$" not in page  # the page: as typed, not escaped


def test_every_figure_text_is_literal():
    """Titles, labels, legends, annotations and text tick labels of a figure with ``$``."""
    from vhpc.report.figures import new_figure, render

    fig = new_figure(4, 3)
    ax = fig.add_subplot()
    ax.bar([0, 1], [1, 2], label=r"$\bar$ env")
    ax.set_xticks([0, 1])
    ax.set_xticklabels([r"$\foo$", "b$"])
    ax.set_ylabel(r"v [$\foo$]")
    ax.set_title(r"$\x{$")
    ax.annotate(r"$\y$", (0, 1))
    ax.legend()
    fig.suptitle(r"$$\z")
    assert render(fig, "svg").startswith("<?xml")
    assert render(fig, "png")[:4] == b"\x89PNG"


# -------------------------------------------------------------- 3. CSV formula injection

def test_csv_cells_are_neutralised_but_numbers_stay_numeric(capsys, tmp_path):
    unit = '=HYPERLINK("http://example.invalid","x")'
    f = campaign_file(tmp_path / "c.yaml", r"v -3\n", unit=unit,
                      envs=("native", "native:name=b"))
    out = tmp_path / "out"
    rc, so, se = run_cli(capsys, "run", f, "--out", out)
    assert rc == 0, se[-2000:]
    (cid,) = campaign_ids(out)
    seen_unit = seen_value = False
    for name in ("samples.csv", "comparisons.csv"):
        with (out / cid / name).open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert rows, name
        for row in rows:
            for k, v in row.items():
                assert not (v or "").startswith(("=", "+", "@", "\t", "\r")), (name, k, v)
                if (v or "").startswith("-"):
                    float(v)  # a genuine negative number, left numeric
            if name == "samples.csv":
                seen_unit |= row["unit"] == "'" + unit
                seen_value |= float(row["value"]) == -3.0
    assert seen_unit and seen_value


@pytest.mark.parametrize("cell,want", [
    ("=1+1", "'=1+1"), ("+1+1", "'+1+1"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\tx", "'\tx"), ("\rx", "'\rx"), ("-1.5", "-1.5"), ("+2e3", "+2e3"), ("ok", "ok"),
    (-3.0, -3.0), (5, 5), ("", "")])
def test_csv_cell(cell, want):
    assert csv_cell(cell) == want


# ----------------------------------------------------- 4. atomic writes, no symlinks

@pytest.fixture()
def two_campaigns(capsys, tmp_path):
    f = campaign_file(tmp_path / "c.yaml", r"v 3\n", repeats=2)
    out = tmp_path / "out"
    for _ in range(2):
        rc, _, se = run_cli(capsys, "run", f, "--out", out)
        assert rc == 0, se[-2000:]
    a, b = campaign_ids(out)
    return out, a, b


def test_diff_refuses_a_planted_symlink_and_never_writes_its_target(capsys, tmp_path,
                                                                   two_campaigns):
    out, a, b = two_campaigns
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    folder = out / f"diff-{a}-{b}"
    folder.mkdir()
    (folder / "diff.html").symlink_to(victim)
    (folder / "diff.json").symlink_to(victim)
    rc, so, se = run_cli(capsys, "diff", a, b, "--out", out)
    assert rc == 2 and "symbolic link" in se and len(se.strip().splitlines()) == 1, se
    assert victim.read_text() == "precious\n"
    for name in ("diff.html", "diff.json"):  # neither followed nor replaced
        assert (folder / name).is_symlink() and os.readlink(folder / name) == str(victim)
    assert sorted(p.name for p in folder.iterdir()) == ["diff.html", "diff.json"]


def test_diff_refuses_a_diff_folder_that_is_a_symlink(capsys, tmp_path, two_campaigns):
    out, a, b = two_campaigns
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / f"diff-{a}-{b}").symlink_to(elsewhere)
    rc, so, se = run_cli(capsys, "diff", a, b, "--out", out)
    assert rc == 2 and "symbolic link" in se, se
    assert list(elsewhere.iterdir()) == []


def test_a_full_disk_leaves_the_old_report_not_a_truncated_one(capsys, tmp_path, monkeypatch,
                                                                two_campaigns):
    out, a, _ = two_campaigns
    html = out / a / "report.html"
    old = html.read_bytes()
    assert old

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(paths.os, "fsync", full)
    rc, so, se = run_cli(capsys, "report", a, "--out", out)
    assert rc == 2 and "full" in se and len(se.strip().splitlines()) == 1, se
    assert html.read_bytes() == old
    assert not [p for p in (out / a).iterdir() if p.name.endswith(".tmp")]


def test_write_atomic_never_follows_or_replaces_a_symlink_and_cleans_up(tmp_path, monkeypatch):
    target = tmp_path / "t"
    target.write_text("old")
    link = tmp_path / "l"
    link.symlink_to(target)
    with pytest.raises(paths.OutputPathError, match="symbolic link"):
        paths.write_atomic(link, "new")
    assert target.read_text() == "old" and link.is_symlink()

    def boom(fd):
        raise OSError(errno.EIO, "I/O error")
    monkeypatch.setattr(paths.os, "fsync", boom)
    with pytest.raises(OSError) as exc:
        paths.write_atomic(target, "partial")
    assert exc.value.filename == str(target)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l", "t"]


# ------------------------------------------------------------------ 5. finite extremes

EXTREMES = {
    "near 1e200": ([1.0e200, 1.1e200, 1.2e200, 1.05e200], [2.0e200, 2.1e200, 2.2e200, 1.9e200]),
    "near max": ([1.7e308, 1.6e308, 1.5e308, 1.65e308], [1.7e308, 1.75e308, 1.69e308, 1.6e308]),
    "subnormal": ([1e-320, 2e-320, 3e-320, 1.5e-320], [1e-320, 1e-320, 2e-320, 4e-320]),
    "both ends": ([1e-300, 1e300, 1.0, 5.0], [1.7e308, 1e-308, 3.0, 4.0]),
}


def _obs(env, values, trial0=0):
    from vhpc.core.metrics import Observation

    return [Observation(environment=env, benchmark="b", params="n=1", metric="time", unit="s",
                        higher_is_better=False, value=v, valid=True, warmup=False,
                        trial_id=trial0 + i, session_index=None) for i, v in enumerate(values)]


@pytest.mark.parametrize("case", sorted(EXTREMES))
def test_finite_extremes_analyse_and_report(case, tmp_path):
    """analyse() of finite extreme values gives a result or an honest "cannot compute"
    (None), never an exception; the report writers (HTML with figures, CSV, JSON) cope."""
    from vhpc.analysis import analyse
    from vhpc.core.metrics import EnvInfo
    from vhpc.report import export, figures

    native, vm = EXTREMES[case]
    envs = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "kvm", {})}
    obs = _obs("native", native) + _obs("vm", vm, 100)
    result = analyse(obs, envs, "native")
    (c,) = result.comparisons
    for v in (c.ratio, *c.ratio_ci, c.mean, c.mean_baseline, c.p_value):
        assert v is None or math.isfinite(v), (case, c)
    if case == "near 1e200":  # scale-free numbers: the same as for values near 1
        scaled = analyse(_obs("native", [v / 1e200 for v in native])
                         + _obs("vm", [v / 1e200 for v in vm], 100), envs, "native")
        (ref,) = scaled.comparisons
        assert c.ratio == pytest.approx(ref.ratio) and c.p_value == pytest.approx(ref.p_value)
        assert c.ratio_ci == pytest.approx(ref.ratio_ci)
    if case == "near max":
        # the ratio of geometric means, from the logs (no product of values near the maximum)
        lg = lambda xs: sum(math.log(v) for v in xs) / len(xs)  # noqa: E731
        assert c.ratio == pytest.approx(math.exp(lg(vm) - lg(native)))
        assert None not in c.ratio_ci
    figures.relative_bars(result)
    figures.distributions(result, obs)
    meta = {"id": "x", "date": "", "command": "", "status": "finished", "spec": {},
            "trials": 8, "failed": 0, "failures": None}
    written = export.export_all(export.ReportData(result, obs, meta, (), ()), tmp_path, {})
    doc = json.loads(Path(written["json"]).read_text())
    assert doc["comparisons"]


@pytest.mark.parametrize("case", sorted(EXTREMES))
def test_finite_extremes_in_a_ratio_of_ratios(case):
    """vhpc diff's change of a ratio (Welch on the ln values of four samples) stays finite."""
    from vhpc.core import logratio

    a, b = EXTREMES[case]
    lw = logratio.log_contrast((a, b, b, a), (1, -1, -1, 1))
    lo, hi = lw.interval(0.95)
    for v in (lw.ratio, lo, hi, lw.p):
        assert v is None or math.isfinite(v), (case, lw, lo, hi)
    if case != "both ends":
        assert lo is not None and lo <= lw.ratio <= hi


# ------------------------------------------------- 6. a slowdown= the kernel did not apply

SPIN = ["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo v 1"]


def _spin_campaign(tmp_path: Path, command: list[str]) -> Path:
    """A campaign file: custom benchmark ``spin`` (``command``, metric v) on native and on
    ``x`` with slowdown=0.3, 2 rounds without warm-up."""
    probe = {"name": "spin", "command": command,
             "metrics": [{"name": "v", "regex": r"v (\d+)", "unit": "1",
                          "higher_is_better": True}]}
    doc = {"custom": [probe], "benchmarks": ["spin"],
           "environments": ["native", "native:name=x,slowdown=0.3"], "warmup": 0, "repeats": 2}
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(doc))
    return f


def test_an_unapplied_slowdown_is_a_finding_in_the_report_and_the_diff(capsys, tmp_path,
                                                                      monkeypatch):
    """Where the kernel has no cgroup-v2 freezer (here: none found, as on an old kernel),
    ``slowdown=`` falls back to the CPU quota and says so in one line before the run.
    ``native:name=x,slowdown=0.3`` without cpus= on a one-thread benchmark: the quota is for
    every CPU of the host and one is busy, so the kernel throttles nothing.  The report and the
    diff say so, with the advice to pin or set slowdown_cpus."""
    from vhpc.host import freezer

    monkeypatch.setattr(freezer, "CGROUP_ROOT", tmp_path / "no-cgroup-v2")
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs a host with 2 or more CPUs (with one, the quota does bite)")
    f = _spin_campaign(tmp_path, SPIN)
    out = tmp_path / "out"
    for _ in range(2):
        rc, so, se = run_cli(capsys, "run", f, "--out", out)
        if rc == 2 and "bandwidth" in se:
            pytest.skip(f"no CPU bandwidth control here: {se.strip()}")
        assert rc == 0, se[-2000:]
        assert "slowdown= on x: no cgroup v2 hierarchy" in se and "CPU bandwidth control" in se
        assert "slowdown=0.3 was requested but the kernel applied" in so
        assert "slowdown_cpus" in so
    a, b = campaign_ids(out)
    report = json.loads((out / b / "results.json").read_text())
    kinds = [x for x in report["findings"] if x.get("kind") == "slowdown-not-applied"]
    assert kinds and kinds[0]["scope"] == "x", report["findings"]
    rc, so, se = run_cli(capsys, "diff", a, b, "--out", out)
    assert rc == 0, se[-2000:]
    assert "slowdown=0.3 was requested" in so and "slowdown_cpus" in so
    dj = json.loads((out / f"diff-{a}-{b}" / "diff.json").read_text())
    assert {x["campaign"] for x in dj["findings"]} == {"A", "B"}
    assert "slowdown_cpus" in (out / f"diff-{a}-{b}" / "diff.html").read_text()


def test_the_freezer_slowdown_holds_without_pinning(capsys, tmp_path):
    """The same campaign with the cgroup-v2 freezer (this host's kernel has it): the trials are
    frozen for 0.3/1.3 of their time whatever CPUs they use, so nothing is said before the run
    and there is no "not applied" finding."""
    from vhpc.host import freezer

    if freezer.v2_base() is None or not os.access(freezer.v2_base(), os.W_OK):
        pytest.skip("needs a writable cgroup v2 hierarchy")
    f = _spin_campaign(tmp_path, ["sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); "
                                  "done; echo v 1"])
    out = tmp_path / "out"
    rc, so, se = run_cli(capsys, "run", f, "--out", out)
    assert rc == 0, se[-2000:]
    assert "CPU bandwidth control" not in se and "was requested but" not in so
    (cid,) = campaign_ids(out)
    from vhpc.store import Store

    th = [t.diagnostics.throttle for t in Store(out / "vhpc.db").trials(cid)
          if t.environment == "x"]
    assert len(th) == 2 and all(t["method"] == "freezer" for t in th)
    assert all(t["applied"] == pytest.approx(0.3, abs=0.05) for t in th)


def test_slowdown_findings_rule():
    from types import SimpleNamespace as NS

    from vhpc.analysis.findings import slowdown_findings

    def trial(env, applied, requested=0.3, status="done", warmup=False, periods=(100, 0)):
        th = {"applied": applied, "requested": requested, "cpus": 2,
              "periods": periods[0], "throttled_periods": periods[1]}
        return NS(environment=env, status=status, warmup=warmup,
                  diagnostics=NS(throttle=th))
    trials = [trial("ok", 0.29), trial("ok", 0.27), trial("off", 0.01), trial("off", 0.0),
              trial("half", 0.16), trial("half", 0.14), trial("warm", 0.0, warmup=True),
              trial("failed", 0.0, status="failed"), NS(environment="plain", status="done",
                                                         warmup=False, diagnostics=NS()),
              # a busy host: the throttled time understates it, but the quota ran out in
              # most periods (the limit bit); a quota never reached is not applied
              trial("busy", 0.1, periods=(134, 118)), trial("busy", 0.12, periods=(138, 116)),
              trial("idle", 0.0, periods=(140, 2))]
    found = {f.scope: f for f in slowdown_findings(trials)}
    assert set(found) == {"off", "idle"}
    assert found["off"].level == "warn" and "cpus=" in found["off"].advice


# -------------------------------------- 7. generated input: markup in every user string

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

BOUNDED = settings(max_examples=4, deadline=None, derandomize=True,
                   suppress_health_check=[HealthCheck.too_slow,
                                          HealthCheck.function_scoped_fixture])
PIECES = ["[", "]", "[/x]", "[bold]", "[/]", "$", r"\foo", "$x^2$", "=", "+", "-", "@", "\t",
          "\r", "\n", ESC + "[31m", ESC + "[2J", ESC + "]0;t\x07", "<script>", "&amp;", "a",
          "1", " ", "'", '"', "%s", "{x}", "\\", "=HYPERLINK(\"http://x\",\"y\")", "µ"]
hostile = st.one_of(st.lists(st.sampled_from(PIECES), min_size=1, max_size=5).map("".join),
                    st.text(min_size=1, max_size=6))


def _assert_csv_inert(path: Path) -> None:
    with path.open(newline="", encoding="utf-8") as fh:
        for row in csv.reader(fh):
            for cell in row:
                assert not cell.startswith(("=", "+", "@", "\t", "\r")) or \
                    _number(cell), (path.name, cell)
                if cell.startswith("-"):
                    assert _number(cell) or cell.startswith("'"), (path.name, cell)


def _number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


@BOUNDED
@given(bench=hostile, params=hostile, metric=hostile, unit=hostile, env=hostile)
def test_markup_in_every_user_string_through_every_writer(tmp_path_factory, bench, params,
                                                          metric, unit, env):
    """Observations whose benchmark, parameters, metric, unit and environment name hold
    markup, math text, formulas and escapes: the terminal table, the HTML report with its
    figures, CSV, JSON and the diff (terminal, HTML, JSON) are written without an exception;
    the terminal gets no escape sequence, CSV cells are inert, HTML escapes the text."""
    import io

    from rich.console import Console

    from vhpc.analysis import analyse
    from vhpc.analysis import diff as d
    from vhpc.core.metrics import EnvInfo, Observation
    from vhpc.report import diff as present
    from vhpc.report import export, terminal
    from vhpc.workflows.common import safe_console

    if env == "native":
        env += "-x"
    envs = {"native": EnvInfo("native", "native"), env: EnvInfo(env, "vm", "kvm", {"cpu": unit})}

    def obs(scale, t0):
        out = []
        for i, (e, v) in enumerate([("native", 1.0), ("native", 1.1), ("native", 0.9),
                                    (env, 2.0), (env, 2.2), (env, 1.9)]):
            out.append(Observation(environment=e, benchmark=bench, params=params, metric=metric,
                                   unit=unit, higher_is_better=False, value=v * scale,
                                   valid=True, warmup=False, trial_id=t0 + i,
                                   session_index=None))
        return out
    observations = obs(1.0, 0)
    result = analyse(observations, envs, "native")
    buf = io.StringIO()
    con = safe_console(Console(file=buf, width=400, force_terminal=False, color_system=None))
    terminal.render_table(result, con, title=f"campaign {bench}")
    text = buf.getvalue()
    assert ESC not in text and "\x07" not in text
    folder = tmp_path_factory.mktemp("w")
    meta = {"id": "x", "date": "", "command": f"vhpc run {bench}", "status": "finished",
            "spec": {}, "trials": 6, "failed": 0, "failures": None}
    written = export.export_all(export.ReportData(result, observations, meta, (), ()), folder, {})
    for name in ("samples-csv", "comparisons-csv", "families-csv"):
        _assert_csv_inert(Path(written[name]))
    json.loads(Path(written["json"]).read_text())
    html = Path(written["html"]).read_text()
    assert html.count("<script") == 1  # the template's own; "<script>" in a name is escaped
    a = d.CampaignData("A", 1.0, {"baseline": "native"}, envs, tuple(observations))
    b = d.CampaignData("B", 2.0, {"baseline": "native"}, envs, tuple(obs(1.2, 100)))
    result = d.diff(a, b)
    buf = io.StringIO()
    con = safe_console(Console(file=buf, width=400, force_terminal=False, color_system=None))
    present.render_terminal(result, con)
    assert ESC not in buf.getvalue()
    present.write_html(result, folder / "diff.html")
    json.loads(present.write_json(result, folder / "diff.json").read_text())


@settings(max_examples=60, deadline=None, derandomize=True)
@given(env=hostile, bench=hostile, note=hostile, command=hostile, out=hostile)
def test_markup_in_the_progress_line_and_the_campaign_list(env, bench, note, command, out):
    """The progress bar (description, failure notes) and ``list campaigns`` rows with
    generated hostile text: no exception, no escape sequence reaches the terminal."""
    import io

    from rich.console import Console

    from vhpc.report import console as views
    from vhpc.workflows.common import RichProgress, safe_console

    buf = io.StringIO()
    con = safe_console(Console(file=buf, width=300, force_terminal=False, color_system=None))
    bar = RichProgress(con)

    class Row:
        environment, benchmark, warmup, round = env, bench, False, 1
    bar.start(1, 0)
    bar.trial(Row)
    bar.finished(Row, "failed", note)
    bar.stop()
    views.campaigns(con, [{"id": env, "status": bench, "done": 0, "failed": 1, "total": 1,
                           "command": command}], out)
    assert ESC not in buf.getvalue()


def test_a_report_folder_that_is_a_symlink_is_refused(capsys, tmp_path, two_campaigns):
    out, a, _ = two_campaigns
    import shutil

    shutil.rmtree(out / a)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / a).symlink_to(elsewhere)
    rc, so, se = run_cli(capsys, "report", a, "--out", out)
    assert rc == 2 and "symbolic link" in se and len(se.strip().splitlines()) == 1, se
    assert list(elsewhere.iterdir()) == []
