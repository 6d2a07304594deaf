"""Docs cite only files that exist: a renamed module or a removed page fails here, not in a
reader's browser.  Checks every repository path (``docs/…``, ``src/…``, ``kernels/…``,
``tests/…``, ``bench/…``) named in the README, the docs, the Python sources and the kernels'
sources, and every relative Markdown link in the README and docs/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATH_RE = re.compile(r"(?<![\w/.])((?:docs|src|kernels|tests|bench)/[A-Za-z0-9_./-]*[A-Za-z0-9_])")
LINK_RE = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _sources() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted((ROOT / "src" / "vhpc").rglob("*.py"))
    files += sorted(p for p in (ROOT / "kernels").rglob("*") if p.suffix in (".c", ".h", ".md"))
    return files


def cited_paths(text: str) -> set[str]:
    """Repository-relative paths named in ``text`` (trailing punctuation stripped)."""
    out = set()
    for m in PATH_RE.finditer(text):
        p = m.group(1).rstrip(".")
        if "*" in p or p.endswith("/") or p.startswith("kernels/build"):
            continue  # patterns, folders, build output (absent before `make kernels`)
        out.add(p)
    return out


def test_cited_paths_regex_finds_a_planted_missing_file():
    assert cited_paths("see docs/nowhere.md, and src/vhpc/spec/parse.py.") == {
        "docs/nowhere.md", "src/vhpc/spec/parse.py"}
    assert not (ROOT / "docs/nowhere.md").exists()


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_repository_path_exists(path: Path):
    text = path.read_text(errors="replace")
    missing = sorted(p for p in cited_paths(text)
                     if not (ROOT / p).exists() and not (path.parent / p).exists())
    assert not missing, f"{path.relative_to(ROOT)} cites missing files: {missing}"


@pytest.mark.parametrize("path", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_links_resolve(path: Path):
    links = [m.group(1) for m in LINK_RE.finditer(path.read_text())]
    missing = [link for link in links if "://" not in link and not (path.parent / link).exists()]
    assert not missing, f"{path.relative_to(ROOT)} links to missing files: {missing}"
