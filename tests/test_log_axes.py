"""Figures on log axes: the geometric interval (positive bounds) from the figure data, and no
whisker below the axis' floor; an interval the table would not print is not drawn."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from vhpc.analysis import analyse
from vhpc.analysis.figdata import PanelData, Point, Series, figure_data
from vhpc.campaign.studies import STUDIES
from vhpc.core.metrics import EnvInfo, Observation
from vhpc.report import studyfig


def test_a_log_panel_gets_the_geometric_mean_and_its_positive_interval():
    # OpTime at 1 B of 1, 10 and 100 µs: mean 37 ± t·s reaches below 0 at n = 3; the
    # geometric mean is 10, its ln-scale interval exp(ln 10 ± t·s_ln) stays above 0
    obs = [Observation(env, "osu-bw", "max_size=1", "optime_1", "us", False, v, valid=True,
                       warmup=False, trial_id=i * 10 + j, session_index=None)
           for i, env in enumerate(("native", "vm")) for j, v in enumerate((1.0, 10.0, 100.0))]
    envs = {"native": EnvInfo("native", "native", None, {}), "vm": EnvInfo("vm", "vm", "kvm", {})}
    fd = figure_data(STUDIES.get("mpi-p2p").figure, analyse(obs, envs, "native"))
    (pd,) = [p for p in fd.panels if p.title.startswith("Fig. 3")]
    (pt,) = pd.series[0].points
    assert abs(pt.y - 10.0) < 1e-9 and 0 < pt.low < 10.0 < pt.high
    # t(2, 0.975) = 4.303, s_ln = ln 10: the bounds are 10 · exp(∓4.303 · ln 10 / √3)
    assert abs(pt.low - 10 * 10 ** (-4.303 / 3 ** 0.5)) / pt.low < 1e-3


def test_no_whisker_runs_below_the_floor_of_a_log_axis():
    pts = [Point(1, 2.0, 1.5, 2.5, 3), Point(8, 3.0, 0.05, 40.0, 3),  # wide (800 times) but printed
           Point(64, 4.0, 1e-6, 1e4, 3),  # wider than 1000 times: not drawn (hollow)
           Point(512, 5.0, -3.0, 13.0, 3)]  # a bound ≤ 0: no place on a log axis, not drawn
    pd = PanelData("t", "size", "OpTime [µs]", True, True, False, True, "us",
                   [Series("vm", pts)])
    fig, ax = plt.subplots()
    try:
        studyfig._draw_panel(ax, pd, [])
        bottom, _ = ax.get_ylim()
        assert bottom <= 0.05 / 1.5 * 1.0001  # below the lowest drawn bound, not at 1e-6 or -3
        assert [studyfig._few(p, True) for p in pts] == [False, False, True, True]
        assert not studyfig._few(pts[3], False)  # a linear axis keeps its interval
        labels = ax.get_legend_handles_labels()[1]
        assert any("interval > ×1,000, no interval" in t for t in labels)
    finally:
        plt.close(fig)


def test_a_sweep_on_a_log_axis_draws_geometric_means_above_its_floor():
    from vhpc.analysis.families import families
    from vhpc.report import sweeps

    # latency over 1 B … 1 MiB spanning 4 decades, three runs of 1, 3 and 9 times at 1 B
    obs = [Observation(env, "osu-latency", "", f"lat_{x}", "us", False,
                       (x / 100 + 1) * k * (v if x == 1 else 1.0 + 0.01 * j), valid=True,
                       warmup=False, trial_id=i * 10 + j, session_index=None)
           for i, (env, k) in enumerate((("native", 1.0), ("vm", 2.0)))
           for j, v in enumerate((1.0, 3.0, 9.0)) for x in (1, 1024, 1048576)]
    envs = {"native": EnvInfo("native", "native", None, {}), "vm": EnvInfo("vm", "vm", "kvm", {})}
    a = analyse(obs, envs, "native")
    (fam,) = [f for f in families(a) if f.quantity == "lat"]
    svg = sweeps.family_figure(a, fam, "svg")
    assert svg and "<svg" in svg
    # the 1 B point: the geometric mean 3.03 (not the arithmetic 4.38), its bar from the
    # ln-scale interval, above 0; mean − t·s falls below 0 and would run to the floor
    s = a.summary("osu-latency", "", "lat_1", "native")
    assert abs(s.gmean - 3.03) < 1e-6 and s.ci_low < 0 < s.gmean_low
    below, above = sweeps._log_error_bar(s)
    assert abs(below - (s.gmean - s.gmean_low)) < 1e-9 and below < s.gmean
    assert abs(above - (s.gmean_high - s.gmean)) < 1e-9
