"""A 2 × 2 campaign's terminal summary at 80 columns: at most 30 lines, the findings do not
repeat what the rows say, every line fits, and the trust line every row shares names TCG as the
HTML report does; the check counts only the other environments' trials."""

from __future__ import annotations

from types import SimpleNamespace

from rich.console import Console

from vhpc.analysis import analyse
from vhpc.analysis.checks import check_findings
from vhpc.core.metrics import EnvInfo, Observation
from vhpc.report.terminal import render_table


def _two_by_two():
    obs = []
    for i, (env, k) in enumerate((("native", 1.0), ("vm", 9.0))):
        for j, noise in enumerate((0.7, 1.3)):  # two runs, 30 % apart: noisy, too few
            obs += [Observation(env, "stream", "", "copy_bw", "GB/s", True, 5.0 / k * noise,
                                valid=True, warmup=False, trial_id=i * 10 + j,
                                session_index=None),
                    Observation(env, "randomaccess", "", "gups", "GUP/s", True,
                                0.02 / k * noise, valid=True, warmup=False,
                                trial_id=i * 10 + j + 5, session_index=None)]
    envs = {"native": EnvInfo("native", "native", None, {}),
            "vm": EnvInfo("vm", "vm", "tcg", {"emulated": True})}
    return analyse(obs, envs, "native")


def test_a_two_by_two_summary_fits_30_lines_of_80_columns_without_repeating_the_rows():
    a = _two_by_two()
    kinds = {f.kind for f in a.findings}
    assert {"inconclusive", "few-samples", "high-variation"} <= kinds  # what the rows say
    con = Console(record=True, width=80, color_system=None)
    render_table(a, con, title="vhpc campaign c1", detail=False, all_hint="vhpc report c1 --all",
                 notes=["This host: load average 10.2 – 13.9 (median 12.4) around 8 trials, "
                        "2 CPUs"])
    con.print("Report: vhpc-results/20261207-212555-e3a3/report.html")
    lines = con.export_text().rstrip("\n").splitlines()
    assert len(lines) <= 30, "\n".join(lines)
    assert max(len(line.rstrip()) for line in lines) <= 80
    text = "\n".join(lines)
    assert "inconclusive (the interval" not in text and "too few valid samples" not in text
    assert "high variation" not in text and "kind(s) of note" not in text
    assert "Limits trust in every row: TCG emulation, not KVM; n = 2 < 3" in text
    assert text.count("inconclusive") == 2  # once per row


def test_the_check_counts_the_other_environments_trials_only():
    spec = {"baseline": "native", "benchmarks": [{"name": "lammps", "params": {}}]}
    trials = [SimpleNamespace(id=i, benchmark="lammps", params="", environment=env,
                              status="done", error=None, round=i)
              for i, env in enumerate(["native"] * 3 + ["vm"] * 3)]
    (passed,) = [f for f in check_findings(trials, spec) if f.kind == "check-passed"]
    assert passed.message.startswith("check: 3 of 3 trials agree with native")


def test_doctor_at_80_columns_keeps_whole_cells_and_names_every_component():
    """``vhpc doctor`` at 80 columns: every line fits, no status cell is folded mid-word
    (the found paths and the RHEL column are left to wider terminals), every component is a
    row; at 120 columns the RHEL column and the paths are back."""
    import os
    import subprocess
    import sys

    from vhpc.workflows.parts import components

    def doctor(columns: int) -> str:
        out = subprocess.run([sys.executable, "-m", "vhpc.cli", "doctor"], capture_output=True,
                             text=True, env={**os.environ, "COLUMNS": str(columns)}, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    narrow, wide = doctor(80), doctor(120)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert "RHEL" not in narrow and "RHEL" in wide
    statuses = [line.split("│")[3].strip() for line in narrow.splitlines()
                if line.startswith("│") and line.split("│")[1].strip()]  # a row's first line
    assert statuses and all(s.split()[0] in ("present", "missing") for s in statuses), statuses
    names = {line.split("│")[1].strip() for line in narrow.splitlines() if line.startswith("│")}
    assert {c.name for c in components() if len(c.name) <= 18} <= names
    assert "/usr/bin/" in wide and "/usr/bin/" not in narrow


def test_a_diff_at_80_columns_prints_whole_cells_and_the_wide_one_a_table():
    """``vhpc diff`` at 80 columns: one block per row (benchmark · metric · environment, then
    each figure as "column value"), every line within 80 columns, no cell cut to '…', each
    row's verdict shown; at 200 columns the overhead table with its eleven columns."""
    import io

    from vhpc.analysis import diff as d
    from vhpc.report import diff as present

    envs = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "kvm", {})}

    def obs(scale: float, t0: int) -> tuple[Observation, ...]:
        values = [("native", 1.0), ("native", 1.1), ("native", 0.9),
                  ("vm", 2.0 * scale), ("vm", 2.2 * scale), ("vm", 1.9 * scale)]
        return tuple(Observation(e, "stream", "n=2000000", metric, "GB/s", True, v, valid=True,
                                 warmup=False, trial_id=t0 + i, session_index=None)
                     for metric in ("copy_bw", "triad_bw") for i, (e, v) in enumerate(values))

    result = d.diff(d.CampaignData("A", 1.0, {"baseline": "native"}, envs, obs(1.0, 0)),
                    d.CampaignData("B", 2.0, {"baseline": "native"}, envs, obs(3.0, 100)))

    def text(width: int) -> str:
        buf = io.StringIO()
        present.render_terminal(result, Console(file=buf, width=width, color_system=None))
        return buf.getvalue()

    narrow, wide = text(80), text(200)
    assert max(len(line) for line in narrow.splitlines()) <= 80 and "…" not in narrow
    verdicts = [c["verdict"] for c in present.overhead_cells(result)]
    assert len(verdicts) == 2 and all(f"verdict {v}" in narrow for v in verdicts)
    assert "stream[n=2000000] · copy_bw [GB/s] ↑ · vm/native" in narrow
    assert "┃ benchmark" in wide and "┃ benchmark" not in narrow
