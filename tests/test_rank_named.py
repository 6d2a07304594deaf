"""``--method rank`` named wherever it decided: the headline's line and column, the legend, the
HTML report; the run told before its runs are spent when they cannot give a rank interval."""

from __future__ import annotations

import io
import math

from rich.console import Console

from conftest import run_cli
from vhpc.analysis import analyse
from vhpc.core import stats
from vhpc.core.metrics import EnvInfo, Observation


def test_the_fewest_runs_for_a_rank_interval_are_the_exact_tests_smallest_p():
    # the smallest two-sided p of the exact Mann–Whitney test with n a side is 2 / C(2n, n):
    # 0.1 at 3, 0.029 at 4, 0.0079 at 5 (Hollander & Wolfe, Table A.6)
    assert [round(2 / math.comb(2 * n, n), 4) for n in (3, 4, 5)] == [0.1, 0.0286, 0.0079]
    assert stats.rank_min_runs(0.95) == 4 and stats.rank_min_runs(0.975) == 5
    assert stats.rank_min_runs(0.99) == 5
    # and the interval itself: none at 3 a side, bounds at 4
    assert stats.hodges_lehmann([1, 2, 3], [4, 5, 6])[1] is None
    assert stats.hodges_lehmann([1, 2, 3, 4], [5, 6, 7, 8])[1] is not None


def _ranked(n: int):
    envs = {"native": EnvInfo("native", "native", None, {}), "vm": EnvInfo("vm", "vm", "kvm", {})}
    return analyse(_obs(n), envs, "native", method="rank")


def _terminal(analysis) -> str:
    from vhpc.report.terminal import render_headline

    buf = io.StringIO()
    render_headline(analysis, Console(file=buf, width=80, color_system=None))
    return buf.getvalue()


def test_a_rank_headline_names_the_method_and_shows_the_estimate_it_decided_on():
    text = _terminal(_ranked(6))
    assert "By ranks (--method rank): HL overhead = the Hodges–Lehmann ratio" in text
    assert "HL overhead [interval]" in text and "HL overhead: from the Hodges–Lehmann" in text
    # 6 a side: the ×19.7 slowdown is decided from the rank interval printed beside it
    assert "×19.7 [" in text and "slower" in text
    # 3 a side: no rank interval at 95 %, and the cell says why and what it needs
    few = _terminal(_ranked(3))
    assert "×19.7  inconclusive" in few and "interval by ranks" in few and "(≥ 4 a side)" in few
    assert max(len(line) for line in few.splitlines()) <= 80


def test_a_rank_campaign_is_told_before_its_runs_when_they_give_no_interval(capsys, tmp_path):
    rc, out, err = run_cli(capsys, "compare", "-b", "stream", "-e", "native",
                           "-e", "native:name=again", "--method", "rank", "--repeats", "3",
                           "--dry-run", "--out", tmp_path)
    assert rc == 0 and "nothing is started" in out
    assert "--method rank: 3 run(s) a side give no interval: it needs ≥ 4 a side at 95 %" in err
    assert "use --repeats 4 or more" in err
    rc, out, err = run_cli(capsys, "compare", "-b", "stream", "-e", "native",
                           "-e", "native:name=again", "--method", "rank", "--repeats", "4",
                           "--dry-run", "--out", tmp_path)
    assert rc == 0 and "--method rank" not in err


def test_the_html_report_of_a_rank_campaign_names_the_method_and_the_estimate():
    from vhpc.report import html as report_html

    a = _ranked(6)
    page = report_html.render_html(a, [], {})
    assert "Overhead relative to native, by ranks (--method rank)" in page
    assert "<b>Hodges–Lehmann ratio</b>" in page and "HL overhead [CI]" in page
    assert "Welch's t\non ln values" not in page  # the log-Welch legend is not shown
    envs = {"native": EnvInfo("native", "native", None, {}), "vm": EnvInfo("vm", "vm", "kvm", {})}
    log_welch = report_html.render_html(analyse(_obs(6), envs, "native"), [], {})
    assert "HL overhead" not in log_welch and "by ranks" not in log_welch
    assert "Welch's t\non ln values" in log_welch


def _obs(n: int):
    return [Observation(env, "stream", "", "triad_bw", "GB/s", True, v * (1 + 0.01 * j),
                        valid=True, warmup=False, trial_id=i * 100 + j, session_index=None)
            for i, (env, v) in enumerate((("native", 98.5), ("vm", 5.0))) for j in range(n)]
