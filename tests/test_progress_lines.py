"""Progress that says what happens: the bar's clock shows a trial's own time once it runs
beyond what the trials before it took (no ETA standing still), a line for every boot or
reboot, and image-build lines that name the stage, never a stale tool line."""

from __future__ import annotations

import io

from rich.console import Console

from vhpc.environments.vm import imagebuild
from vhpc.host.contained import BuildBox
from vhpc.workflows import common


class Row:
    def __init__(self, env, bench, rnd=1):
        self.environment, self.benchmark, self.warmup, self.round = env, bench, False, rnd


def _bar(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(common.time, "monotonic", lambda: clock[0])
    buf = io.StringIO()
    bar = common.RichProgress(common.safe_console(Console(file=buf, width=120,
                                                          color_system=None)))
    return bar, clock, buf


def test_a_trial_beyond_its_estimate_shows_its_own_time_not_a_frozen_eta(monkeypatch):
    bar, clock, out = _bar(monkeypatch)
    column = bar.bar.columns[-1]
    bar.start(12, 0)
    try:
        for i in range(10):  # ten trials of 1 s each
            bar.trial(Row("vm", "stream", i))
            clock[0] += 1.0
            bar.finished(Row("vm", "stream", i), "done", "")
        bar.trial(Row("vm", "stream", 10))
        task = bar.bar.tasks[0]
        clock[0] += 0.5  # within what the others took: an ETA
        assert column.render(task).plain.startswith("ETA ")
        clock[0] += 320.5  # 321 s into a trial the others finished in 1 s
        assert column.render(task).plain == "trial 0:05:21, ≈0:00:01 expected"
        # a guest reboot: a line of its own, and the clock counts the boot
        bar.stage("vm", "reboot (session 2) of the guest (TCG emulation: slow)")
        clock[0] += 153
        assert column.render(task).plain == "boot 0:02:33"
        assert "vm: reboot (session 2)" in bar.bar.tasks[0].description
        bar.stage("vm", "ready after 153 s")
        assert column.render(task).plain.startswith("ETA ")  # the trial's time starts again
        assert bar.bar.tasks[0].description == "vm stream (round 10)"
        assert ("vm: reboot (session 2) of the guest (TCG emulation: slow): ready after 153 s"
                in out.getvalue())
    finally:
        bar.stop()


def test_the_first_trial_has_no_eta_but_its_time(monkeypatch):
    bar, clock, _ = _bar(monkeypatch)
    column = bar.bar.columns[-1]
    bar.start(2, 0)
    try:
        assert column.render(bar.bar.tasks[0]).plain == "ETA -:--:--"
        bar.trial(Row("native", "stream"))
        clock[0] += 7
        assert column.render(bar.bar.tasks[0]).plain == "trial 0:00:07"
    finally:
        bar.stop()


def test_a_build_stage_line_never_shows_an_earlier_tools_line(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("Installation finished. No error reported.\n")
    said: list[str] = []
    box = BuildBox(contain=False)  # a session of its own per tool, as where no cgroup can be made
    imagebuild._run_logged(["sleep", "1.2"], log, "qemu-img convert", said.append, box)
    assert said and all(s.startswith("compressing the disk into qcow2 (qemu-img convert, ")
                        for s in said)
    assert not any("Installation finished" in s for s in said)
    said.clear()
    imagebuild._run_logged(["sh", "-c", "echo writing partitions; sleep 1.2"], log, "dd",
                           said.append, box)
    assert said[-1].endswith(": writing partitions")
    assert said[-1].startswith("copying the root file system onto the disk (dd, ")
