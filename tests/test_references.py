"""docs/references.md cites every seed paper and anchor exactly as
:mod:`vhpc.campaign.references` does, and a seed page prints its paper's full citation; no doc
points at a path of one machine."""

from __future__ import annotations

import re
from pathlib import Path

from vhpc.campaign import references
from vhpc.campaign.study import STUDIES

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "references.md").read_text()


def test_every_seed_and_anchor_is_cited_in_full_in_the_docs():
    for ref in (*references.SEEDS.values(), *references.ANCHORS.values()):
        assert ref.authors and ref.title and ref.venue and 1950 < ref.year < 2100
        assert ref.text() in DOC, ref.title
    # by name, as the reader would look them up
    for who in ("Hoefler", "McCalpin", "Heroux", "Bailey", "Plimpton", "Abraham", "Ohio State"):
        assert who in DOC, who


def test_every_study_seed_has_a_citation():
    seeds = {s.seed for _, s in STUDIES.items()}
    assert seeds and seeds <= set(references.SEEDS), sorted(seeds - set(references.SEEDS))
    assert references.cite("004").startswith("John R. Lange, Kevin Pedretti")
    assert "VEE '11" in references.cite("004") and references.cite("999") == ""


def test_a_seed_page_prints_its_citation(tmp_path):
    from vhpc.report.paper import write_seed_page

    page = write_seed_page("003", [], tmp_path / "seed.html").read_text()
    assert 'Yuxia Cheng, Wenzhi Chen. &#34;Evaluation of Virtual Machine Performance' in page \
        or "Yuxia Cheng, Wenzhi Chen. &quot;Evaluation of Virtual Machine Performance" in page \
        or 'Yuxia Cheng, Wenzhi Chen. "Evaluation of Virtual Machine Performance' in page
    assert "3PGCIC" in page and "2013" in page


#: The top-level directories of the Filesystem Hierarchy Standard 3.0 (ch. 3, "The Root
#: Filesystem") and Linux's /proc and /sys (FHS ch. 6): a path under one of them means the same
#: on every Debian host.
FHS = {"bin", "boot", "dev", "etc", "home", "lib", "lib64", "media", "mnt", "opt", "run", "sbin",
       "srv", "tmp", "usr", "var", "proc", "sys"}
#: Root-level links Debian's kernel packages keep in every root filesystem (linux-base,
#: ``do_symlinks`` in kernel-img.conf(5)), named by docs/images.md's kernel boot.
DEBIAN_ROOT_LINKS = {"/vmlinuz", "/initrd.img"}
#: A code span opens at \x01 and closes at \x02, so a path may start right after an opening
#: backtick but not right after a closing one (`PYTHONPATH`/the ... is prose, not a path).
_PATH = re.compile(r"(?:(?<=^)|(?<=[\s\x01\"'(=,\[]))(/[A-Za-z0-9._-]+(?:/[A-Za-z0-9._*{}<>-]+)*)")
#: Names only one machine's temporary directories have: pytest's and mkdtemp's.
_ONE_MACHINE_TMP = re.compile(r"^/tmp/(pytest-of-|tmp[a-z0-9_]{6,}\b)")


def machine_paths(text: str, home: str, checkout: str) -> list[str]:
    """The absolute paths in markdown ``text`` that name one machine: outside the FHS's
    top-level directories (and not a Debian root link), under a home directory or /root, under
    ``home`` or ``checkout`` (this machine's), or a temporary directory of pytest or mkdtemp."""
    found = []
    for line in text.splitlines():
        line = re.sub(r"`([^`]*)`", "\x01\\1\x02", line)
        for path in _PATH.findall(line):
            top = path.split("/")[1]
            if (top not in FHS and path not in DEBIAN_ROOT_LINKS) or top == "root" \
                    or re.match(r"^/home/[^/<{]", path) or _ONE_MACHINE_TMP.match(path) \
                    or path.startswith((home + "/", checkout + "/")) or path in (home, checkout):
                found.append(path)
    return found


def test_the_machine_path_check_finds_each_kind_and_passes_portable_ones():
    text = ("see `/work/wt/x` and /root/.cache or ~ (/home/ada/src), `/tmp/pytest-of-root/p0`,\n"
            "/tmp/tmpa1b2c3d4 and /srv/h/vhpc/docs; but not `/usr/share/seabios`, /dev/kvm,\n"
            "`/vmlinuz`, `PYTHONPATH`/the venv, `-b`/`-e`/campaign, /tmp/vhpc-out or <out>/x")
    assert machine_paths(text, "/srv/h", "/srv/h/vhpc") == [
        "/work/wt/x", "/root/.cache", "/home/ada/src", "/tmp/pytest-of-root/p0",
        "/tmp/tmpa1b2c3d4", "/srv/h/vhpc/docs"]


def test_no_doc_names_a_path_of_one_machine():
    docs = [*sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "docs").rglob("*.yaml")),
            ROOT / "README.md"]
    found = [f"{p.relative_to(ROOT)}: {path}" for p in docs
             for path in machine_paths(p.read_text(), str(Path.home()), str(ROOT))]
    assert found == []
