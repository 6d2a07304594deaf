"""Report sections from stored trials: placement as applied, diagnostics, memory profile."""

from vhpc.core.metrics import EnvInfo
from vhpc.core.records import AppliedPlacement, Diagnostics
from vhpc.report import diagnostics
from vhpc.store import TrialRow


def trial(env, applied=None, diag=None, warmup=False, bench="stream", started=0.0, ended=1.0):
    """A stored trial; applied/diag given as the environments' keyword values."""
    applied = AppliedPlacement(**applied) if applied is not None else None
    diag = Diagnostics.build(**diag) if diag is not None else None
    return TrialRow(1, 0, 0, warmup, env, bench, "", "done", 0, 0, None, "", "", started, ended,
                    applied, diag)


PLAN = {"vcpu_pins": [[2], [3]], "guest_nodes": [{"host_nodes": [1]}]}
ENVS = {"vm": EnvInfo("vm", "vm", "tcg", {"placement": "confine:1: vCPU 0-1→PU 2-3", "plan": PLAN}),
        "native": EnvInfo("native", "native")}


def test_placement_section_shows_plan_readback_locality_and_mismatches():
    good = {"vcpus": [{"vcpu": 0, "allowed": [2], "last_cpu": 2, "last_node": 1},
                      {"vcpu": 1, "allowed": [3], "last_cpu": 3, "last_node": 1}],
            "memory": {"node_mib": {"0": 10.0, "1": 300.0},
                       "mappings": [{"policy": "bind:1", "node_mib": {"1": 270.0, "0": 30.0}}]},
            "guest_numa": [{"node": 0, "cpus": "0-1", "mem_mib": 500}], "mismatches": []}
    bad = dict(good, mismatches=["vCPU 1 may run on [0, 1, 2, 3], planned [3]"])
    html = str(diagnostics.placement_section([trial("vm", bad), trial("vm", good),
                                              trial("native", {"cpus": [0, 1]})], ENVS))
    assert "confine:1: vCPU 0-1→PU 2-3" in html
    assert "page locality</b> (on the planned nodes): 90.0 %" in html   # 270 of 300 MiB
    assert "in 1 trial(s)" in html and "vCPU 1 may run on [0, 1, 2, 3], planned [3]" in html
    assert "node 0: vCPUs 0-1, 500 MiB" in html
    assert "CPUs allowed:</b> [0, 1]" in html


def test_diagnostics_section_averages_and_explains_unavailable_counters():
    d1 = {"rusage": {"user_s": 1.0, "sys_s": 0.5}, "perf": {"unavailable": "no PMU here"}}
    d2 = {"rusage": {"user_s": 3.0, "sys_s": 0.5}, "perf": {"unavailable": "no PMU here"}}
    html = str(diagnostics.diagnostics_section([trial("vm", diag=d1), trial("vm", diag=d2),
                                                trial("vm", diag={"rusage": {"user_s": 99}}, warmup=True)]))
    assert '<td class="num">2</td>' in html          # two measured trials, warm-up left out
    assert '<td class="num">2</td><td class="num">0.5</td>' in html   # user 2.0 s, sys 0.5 s
    assert "perf (vm): no PMU here" in html and "unavailable" in html


def test_memory_profile_section_only_for_local_remote_campaigns():
    assert diagnostics.memory_profile_section([trial("vm")]) is None
    html = str(diagnostics.memory_profile_section([
        trial("local", started=0, ended=2.0), trial("remote", started=0, ended=3.0)]))
    assert "1.500" in html and "CPI was unavailable" in html


def test_sweep_figures_label_log_axes_with_plain_numbers(monkeypatch):
    """Latency over 4 decades on a log axis reads 1, 10, 100, 1000 in the report's sweep
    figure (not 10^0 ... 10^3)."""
    import re

    from vhpc import analysis
    from vhpc.analysis.families import families
    from vhpc.core.metrics import Observation
    from vhpc.report import sweeps

    monkeypatch.setattr(sweeps, "render", lambda fig, fmt="svg": fig)  # the Figure, not SVG
    obs = [Observation(env, "osu-latency", "", f"lat_{size}", "us", False,
                       base * (1 + size / 8) + 0.01 * i, True, False, i)
           for env, base in (("native", 1.0), ("vm", 50.0)) for size in (1, 8, 64, 512)
           for i in range(3)]
    res = analysis.analyse(obs, ENVS, "native")
    (fam,) = [f for f in families(res) if f.sweep]
    family = sweeps.family_figure(res, fam)
    for ax in (family.axes[0],):
        assert ax.get_yscale() == "log"
        fmt = ax.yaxis.get_major_formatter()
        labels = [fmt(y, 0) for y in ax.get_yticks()]
        assert "10" in labels and "100" in labels, labels
        assert all(re.fullmatch(r"[0-9.]+", t) for t in labels), labels


def test_memory_profile_reads_cpi_and_mpki_from_the_diagnostics_record():
    perf = lambda cpi, mpki=None: {"perf": {"counts": {"cycles": 1.0}, "cpi": cpi, "mpki": mpki}}
    html = str(diagnostics.memory_profile_section([
        trial("local", diag=perf(1.0, 4.0)), trial("local", diag=perf(1.2, 6.0)),
        trial("remote", diag=perf(1.65)), trial("remote", diag=perf(1.65), warmup=True)]))
    assert "1.500" in html and "5.00" in html and "high" in html  # 1.65 / 1.1, MPKI 5 > 3
    assert "CPI was unavailable" not in html


def test_relative_bars_show_a_ratio_of_0_02_and_one_of_5_from_the_line_at_1(monkeypatch):
    """The "relative to native" figure draws STREAM at 0.02 of native beside latency at 5×
    (on one linear axis the small bar would be a sliver, and the line at 1 off the axis of a
    panel whose bars all lie below 0.1): bars run from 1 to the ratio on a log axis that holds
    1, every bar and its interval (up to 3× beyond the bars)."""
    from matplotlib.patches import Rectangle

    from vhpc import analysis
    from vhpc.core.metrics import Observation
    from vhpc.report import figures

    monkeypatch.setattr(figures, "render", lambda fig, fmt="svg": fig)
    obs = [Observation(env, "pingpong", "", metric, unit, hib, v * (1 + 0.01 * i), True, False, i)
           for metric, unit, hib, native, vm in (("bandwidth_MBps", "MB/s", True, 10000.0, 200.0),
                                                 ("latency_us", "us", False, 0.5, 2.5))
           for env, v in (("native", native), ("vm", vm)) for i in range(3)]
    res = analysis.analyse(obs, {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "tcg")},
                           "native")
    (ax,) = figures.relative_bars(res).axes
    assert ax.get_yscale() == "log"
    lo, hi = ax.get_ylim()
    assert lo < 0.02 and 5.0 < hi <= 5.0 * 3 * 1.2 and lo < 1 < hi
    spans = sorted((round(min(r.get_y(), r.get_y() + r.get_height()), 4),
                    round(max(r.get_y(), r.get_y() + r.get_height()), 4))
                   for r in ax.patches if isinstance(r, Rectangle) and r.get_width() > 0)
    assert spans == [(0.02, 1.0), (1.0, 5.0)]  # from 1, down and up
    fmt = ax.yaxis.get_major_formatter()
    assert "1" in [fmt(y, 0) for y in ax.get_yticks()]
