"""What the pages say beside a ratio: both environments' centres with their units, no
interval from too few runs or too wide to mean anything, one notation for an overhead, and
the one-environment headline's flags."""

from __future__ import annotations

import math
import re

from rich.console import Console

from vhpc.analysis import analyse
from vhpc.core import intervals
from vhpc.core.metrics import EnvInfo, Observation
from vhpc.report import (comparison_rows, fmt_family_overhead, fmt_overhead, headline_rows,
                         measured_rows)
from vhpc.report.terminal import render_table

ENVS = {"native": EnvInfo("native", "native", None, {}), "vm": EnvInfo("vm", "vm", "kvm", {})}


def obs(env, values, metric="lat", unit="us", hib=False, bench="b"):
    return [Observation(env, bench, "", metric, unit, hib, v, valid=True, warmup=False,
                        trial_id=i) for i, v in enumerate(values)]


def gmean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def test_an_interval_is_hidden_below_3_runs_or_beyond_1000_times_unless_decided():
    assert intervals.interval_hidden(2, 0.5, 2.0)
    assert not intervals.interval_hidden(3, 0.5, 2.0)
    assert intervals.interval_hidden(5, 0.01, 10.01) and not intervals.interval_hidden(5, 0.01, 9.9)
    assert not intervals.interval_hidden(2, 0.5, 2.0, decided=True)  # the verdict reads it
    assert not intervals.interval_hidden(2, None, 2.0)
    assert intervals.too_few_text(7) == ("too few runs for an interval (≈7 runs each: decides 8 "
                                         "times in 10 whatever the ratio, if the spread is "
                                         "within its 80 % bound)")


def test_the_headline_at_80_columns_shows_both_centres_with_units():
    native, vm = [2.2, 1.9, 2.4], [18.0, 14.0, 24.0]
    a = analyse(obs("native", native) + obs("vm", vm), ENVS, "native")
    console = Console(record=True, width=80, color_system=None)
    render_table(a, console=console, detail=False)
    text = console.export_text()
    assert max(map(len, text.splitlines())) <= 80, text
    assert f"b · lat [us] ↓ · native {gmean(native):.4g} us" in text, text
    assert re.search(rf"  vm\s+{gmean(vm):.4g} us\s+×", text), text


def test_every_metric_shows_the_geometric_mean_with_its_interval():
    a = analyse(obs("native", [2.2, 1.9, 2.4]) + obs("vm", [18.0, 14.0, 24.0]), ENVS, "native")
    (row,) = comparison_rows(a)
    assert re.fullmatch(r"[\d.]+ \[[\d.]+, [\d.]+\] \(n=3\)", row.mean), row.mean
    assert re.fullmatch(r"[\d.]+ \[[\d.]+, [\d.]+\] \(n=3\)", row.base), row.base


def test_two_runs_print_no_bound_beyond_1000_times():
    """Two runs a side, 100 times apart and noisy: the ratio's interval spans billions; the
    headline, --all and the findings say "too few runs for an interval" instead."""
    a = analyse(obs("native", [0.28, 0.31]) + obs("vm", [40.0, 150.0]), ENVS, "native")
    console = Console(record=True, width=80, color_system=None)
    render_table(a, console=console, detail=True)
    text = console.export_text()
    assert "too few runs for an" in text
    bounds = re.findall(r"[×÷]([\d,.]+(?:e\d+)?)", text)
    assert bounds and all(float(b.replace(",", "")) < 1000 for b in bounds), bounds
    assert not re.search(r"\de\d", text), text
    (fs,) = [r.summary for r in headline_rows(a)]
    lo, hi = fs.low, fs.high
    assert hi / lo > 1000  # the exact bounds stay in the analysis (CSV and JSON export them)
    # --all writes the overhead as the headline does (no interval: the value's own form)
    assert fmt_overhead(a.comparisons[0]) == fmt_family_overhead(fs).split(",")[0]
    # two runs a side: no plan of runs either (fewer than power.MIN_PILOT), the pilot advice
    assert "too few runs for an interval (run ≥ 10 a side to plan)" in " ".join(text.split())


def test_the_overhead_of_every_metric_takes_the_form_of_its_interval():
    """×6.85 [÷1.37, ×64.4] in the headline was +584.7 % under --all."""
    a = analyse(obs("native", [1.0, 1.2, 0.8]) + obs("vm", [9.0, 4.0, 6.0]), ENVS, "native")
    c = a.comparisons[0]
    assert c.ratio_ci[1] > 10 > c.ratio  # the interval reaches the factor form, the ratio not
    assert fmt_overhead(c) == f"×{c.ratio:.3g}"


def test_one_environment_flags_a_half_width_larger_than_the_mean_and_counts_the_rest():
    """pagefault's primary metric is private_us; shared_us and file_us are what --all adds."""
    envs = {"native": ENVS["native"]}
    data = (obs("native", [1.0, 30.0, 2.0], "private_us", bench="pagefault")
            + obs("native", [5.0, 5.1, 4.9], "shared_us", bench="pagefault")
            + obs("native", [5.0, 5.1, 4.9], "file_us", bench="pagefault"))
    a = analyse(data, envs, "native")
    rows = {r.metric.split()[0]: r for r in measured_rows(a, primary_only=False)}
    assert rows["private_us"].value.endswith("(interval wider than the mean)")
    assert "wider" not in rows["shared_us"].value
    console = Console(record=True, width=80, color_system=None)
    render_table(a, console=console, all_hint="vhpc report X --all")
    text = console.export_text()
    assert "2 more metric(s): vhpc report X --all" in text, text
    assert "(interval wider than the mean)" in " ".join(text.split()), text


def test_an_image_environment_is_named_by_its_image_and_tables_show_the_value_in_force():
    from vhpc.report import env_header
    from vhpc.report.header import spec_section

    image = {"image": {"path": "/home/u/bench.qcow2", "format": "qcow2"}, "boot_timeout": 900.0}
    envs = {"native": ENVS["native"], "vm": EnvInfo("vm", "vm", "tcg", image)}
    a = analyse(obs("native", [2.2, 1.9, 2.4]) + obs("vm", [18.0, 14.0, 24.0]), envs, "native")
    assert env_header(a, "vm") == "vm:bench.qcow2 (TCG emulation)"
    console = Console(record=True, width=80, color_system=None)
    render_table(a, console=console, detail=False)
    assert re.search(r"^  vm:bench\.qcow2 \(TCG\)\s", console.export_text(), re.MULTILINE)
    spec = {"environments": [{"name": "vm", "kind": "vm",
                              "options": {"image": "/home/u/bench.qcow2", "boot_timeout": 90.0}}]}
    html = str(spec_section(spec, {"vm": image}))
    # the value in force, beside the spec's (the raw spec below says 90.0)
    assert "boot_timeout=900.0 in force (the spec&#39;s 90.0)" in html
    assert "boot_timeout=90.0" not in html.split("<details")[0]


def test_the_protocol_line_writes_margin_and_target_ci_as_percentages():
    """One percent syntax: a campaign's ``margin: 5%`` is stored as 0.05 and shown as 5%."""
    from vhpc.report.header import spec_section

    html = str(spec_section({"environments": [], "margin": 0.05, "target_ci": 0.02,
                             "repeats": 5}))
    protocol = html.split('class="spec-protocol">')[1].split("</p>")[0]
    assert "<b>margin</b> 5%" in protocol and "<b>target_ci</b> 2%" in protocol
    assert "<b>repeats</b> 5" in protocol and "0.05" not in protocol


def test_an_image_environment_says_what_it_prepares(monkeypatch):
    """The image checks, kernel copy and first boot of ``vm:image=`` (minutes under TCG) are
    named from the first second, each stage as the environment begins it, with a line of
    each stage's time and the whole time when done; a plain one says nothing."""
    from types import SimpleNamespace

    from vhpc.workflows import common

    monkeypatch.setattr(common, "SAID_AFTER_S", 0.0)
    con = Console(record=True, width=120, color_system=None)
    env = SimpleNamespace(name="vm", options=SimpleNamespace(image="/home/u/bench.qcow2"))
    with common.preparing(env, con):
        env.stage_hook("checking the image (qemu-img check, SHA-256)")
        env.stage_hook("first boot (kernel; minutes under TCG)")
    assert env.stage_hook is None  # nobody listens after the preflight
    lines = [ln for ln in con.export_text().splitlines() if ln.strip()]  # a cleared bar
    assert [re.sub(r"\d+ s$", "N s", ln) for ln in lines] == [
        "vm: preparing image bench.qcow2: N s",
        "vm: checking the image (qemu-img check, SHA-256): N s",
        "vm: first boot (kernel; minutes under TCG): N s",
        "vm: ready after N s"], lines
    plain = Console(record=True, width=120, color_system=None)
    with common.preparing(SimpleNamespace(name="native", options=SimpleNamespace()), plain):
        pass
    assert plain.export_text() == ""


def test_an_image_says_each_stage_of_its_preflight_as_it_begins(tmp_path):
    """ImageEnvironment's own stages, in order: the image checked, then the first boot
    (here refused at once: a 4 MiB disk with nothing to boot is checked, not booted)."""
    import pytest

    from conftest import require_tool
    from vhpc.environments import kind
    from vhpc.environments.base import EnvError
    from vhpc.environments.options import HostFacts
    from vhpc.environments.vm.options import VmOptions

    require_tool("qemu-img")
    disk = tmp_path / "disk.img"
    disk.write_bytes(bytes(4 << 20))  # no partition table, no filesystem: refused by its check
    env = kind.build("vm", "vm", VmOptions(image=str(disk), format="raw", accel="tcg"),
                     HostFacts.live())
    seen: list[str] = []
    env.stage_hook = seen.append
    with pytest.raises(EnvError, match="image="):
        env.preflight()
    assert seen == ["checking the image (qemu-img check, SHA-256)"]


def test_a_lammps_panel_with_fixed_atoms_is_titled_strong_scaling():
    """The applications study's Fig. 7 panel says weak scaling (atoms per rank); run with
    scaling=fixed (the same atoms at every rank count) it measured strong scaling."""
    from vhpc.report.pagetext import scaling_title

    def lammps(scaling):
        return [Observation(env, "lammps", f"ranks={r},scaling={scaling}", "timesteps_per_s",
                            "1/s", True, v * r, valid=True, warmup=False, trial_id=i)
                for i in range(3) for env, v in (("native", 100.0 + i), ("vm", 90.0 + i))
                for r in (1, 2)]

    title = "Fig. 7 (CTH → LAMMPS): weak scaling"
    fixed = analyse(lammps("fixed"), ENVS, "native")
    scaled = analyse(lammps("scaled"), ENVS, "native")
    both = analyse(lammps("fixed") + lammps("scaled"), ENVS, "native")
    metrics = ["timesteps_per_s"]
    assert scaling_title(title, "lammps", metrics, fixed) == \
        "Fig. 7 (CTH → LAMMPS): strong scaling (a fixed total problem)"
    assert scaling_title(title, "lammps", metrics, scaled) == title
    assert "weak and strong scaling" in scaling_title(title, "lammps", metrics, both)


def test_a_seed_quote_reads_as_a_quote():
    """Seed files write Markdown: *cg* is emphasis, not asterisks; a quote that starts inside
    a sentence ("And 3 benchmarks") or stops before its end gets an ellipsis."""
    from vhpc.report.pagetext import quote_html

    q = "And 3 benchmarks (*cg*, *is*, *lu*) running in the VM have some degradation compared"
    assert str(quote_html(q)) == ("“…And 3 benchmarks (<em>cg</em>, <em>is</em>, <em>lu</em>) "
                                  "running in the VM have some degradation compared…”")
    assert str(quote_html("On average, warm runs are 30% slower.")) == \
        "“On average, warm runs are 30% slower.”"
    assert "&lt;b&gt;" in str(quote_html("a <b> tag x_y_z stays."))  # escaped, no emphasis
