"""Registered parts (docs/architecture.md): environment kinds, executors and studies register by
decorator, a duplicate name is refused, an unknown name is one line listing the known ones; each
``vm`` option is validated in one place; the placement is computed once per environment."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from vhpc import placement, topology
from vhpc.core.errors import HostError, SpecError
from vhpc.core.registry import DuplicateName, NoProvider, Registry, UnknownName
from vhpc.environments import kind as kinds_mod
from vhpc.environments.kind import KINDS, EnvironmentKind
from vhpc.environments.options import HostFacts
from vhpc.executors.base import EXECUTORS, Executor, parse
from vhpc.campaign.studies import STUDIES
from vhpc.spec.parse import from_cli

SRC = Path(__file__).resolve().parents[1] / "src" / "vhpc"


@pytest.mark.parametrize("registry, known", [
    (KINDS, {"native", "vm", "ssh", "vcluster"}),
    (EXECUTORS, {"local", "slurm"}),
    (STUDIES, {"cold-warm", "mpi-p2p", "scaling", "partition"}),
])
def test_registries_find_their_parts_and_refuse_duplicates(registry, known):
    assert known <= set(registry.names())
    name = sorted(known)[0]
    with pytest.raises(DuplicateName, match=f"'{name}' is registered twice"):
        registry.register(name)(object())
    with pytest.raises(UnknownName) as err:
        registry.get("no-such-part")
    msg = str(err.value)
    assert "\n" not in msg and "'no-such-part'" in msg
    assert all(k in msg for k in known)


def test_a_registry_loads_its_package_before_the_first_lookup():
    r = Registry("executor", "vhpc.executors")
    assert r.names() == []  # nothing registers into a fresh registry ...
    fresh = Registry("thing")
    fresh.register("a")(type("A", (), {}))
    assert fresh.get("a").name == "a"  # ... and a registered class learns its name


def test_a_new_executor_is_one_class(monkeypatch):
    EXECUTORS.names()  # loaded first: a copy of an unloaded registry would be restored empty
    monkeypatch.setattr(EXECUTORS, "_parts", dict(EXECUTORS._parts))

    @EXECUTORS.register("pbs")
    class PbsExecutor(Executor):
        runs_here = False

        def run(self, env, env_spec, argv, environ, timeout, key):
            raise AssertionError("not run here")

    spec = parse("pbs")
    assert spec.kind == "pbs"
    with pytest.raises(SpecError, match=r"executor pbs: unknown option 'queue=a' \(options: none\)"):
        parse("pbs:queue=a")
    with pytest.raises(SpecError, match="host knobs cannot be set"):
        from_cli(["stream"], ["native"], host_knobs=["thp=never"], executor="pbs")


@pytest.mark.parametrize("argv, message", [
    (["-e", "nope"], "unknown environment 'nope': choose one of"),
    (["-e", "native", "--executor", "pbs"], "unknown executor 'pbs': choose one of local, slurm"),
    (["-e", "native", "--executor", "slurm:nodes=１２"], "ASCII digits"),
])
def test_unknown_names_on_the_command_line_are_one_line_and_exit_2(argv, message, tmp_path):
    r = subprocess.run([sys.executable, "-m", "vhpc.cli", "compare", "-b", "stream", *argv,
                        "--dry-run", "--out", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


#: Every documented bad value of ``-e vm:...`` (docs/environments.md, VmOptions' docstring) and
#: the message that says what to change.  Messages vhpc writes itself must exist in exactly one
#: source file: one validation per option.
BAD_VM = [
    ("vcpus=0", "greater than or equal to 1", None),
    ("vcpus=two", "valid integer", None),
    ("memory=64", "greater than or equal to 128", None),
    ("pin=zero", "use auto, none or a CPU list like 0-1 or 0,2", "use auto, none or a CPU list"),
    ("pin=0,policy=compact", "give either pin= or policy=, not both", "give either pin= or policy="),
    ("policy=diagonal", "unknown policy 'diagonal'", None),
    ("numa=0", "use hidden, mirror or a number of guest nodes", "use hidden, mirror or a number"),
    ("backing=3k", "'4k', '2m' or '1g'", None),
    ("accel=xen", "'auto', 'kvm' or 'tcg'", None),
    ("boot_timeout=0", "greater than 0", None),
    ("guest_bind=0", "use CPUNODES:MEMNODES", "use CPUNODES:MEMNODES"),
    ("corunner=extreme", "'low', 'medium' or 'high'", None),
    ("uri=qemu:///system", "uri= needs backend=libvirt", "needs backend={owner}"),
    ("backend=nope", "Input should be 'qemu' or 'libvirt'", None),
]


@pytest.mark.parametrize("item, message, source_text", BAD_VM, ids=[b[0] for b in BAD_VM])
def test_every_bad_vm_option_has_one_message_from_one_place(item, message, source_text):
    with pytest.raises(SpecError) as err:
        from_cli(["stream"], ["native", f"vm:{item}"])
    assert message in str(err.value) and "\n" not in str(err.value)
    if source_text:
        where = [p for p in SRC.rglob("*.py") if source_text in p.read_text()]
        assert len(where) == 1, where


HOST = HostFacts((0, 1), topology.from_synthetic("pack:1 numa:1 core:2 pu:1"))


@pytest.mark.parametrize("item, message", [
    ("vcpus=3", "vcpus=3 but the host has 2 CPUs"),
    ("vcpus=2,pin=0", "lists 1 host CPUs for 2 vCPUs"),
    ("vcpus=1,pin=5", "this host has no CPU 5"),
])
def test_host_checks_of_vm_options_name_the_environment(item, message):
    spec = from_cli(["stream"], ["native", f"vm:{item}"])
    with pytest.raises(HostError, match=f"environment vm: .*{re.escape(message)}"):
        spec.environments[1].plan(HOST)


def test_the_placement_is_computed_once_per_environment(monkeypatch):
    import os
    import shutil

    from vhpc.campaign import execute as campaign

    if shutil.which("qemu-system-x86_64") is None:  # make test installs it
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("qemu-system-x86 missing")

    calls = []
    real = placement.place
    monkeypatch.setattr(placement, "place", lambda *a, **k: calls.append(a) or real(*a, **k))
    spec = from_cli(["stream"], ["native", "vm:vcpus=1,pin=1", "vm:vcpus=2,policy=compact"])
    host = HostFacts((0, 1), topology.from_synthetic("pack:1 numa:1 core:2 pu:1"))
    envs = campaign.prepare(spec, host)
    assert len(calls) == 2  # two guests, one placement each: none in check, build or boot
    assert envs["vm"].placement.pin_map() == {0: {1}}
    assert envs["vm2"].placement.pin_map() == {0: {0}, 1: {1}}
    calls.clear()
    plans = campaign.placements(spec, host)  # --dry-run: the same, once each
    assert len(calls) == 2 and "unpinned" not in plans["vm"].text


def test_a_kind_registered_in_a_test_is_used_by_the_spec_and_the_campaign(monkeypatch):
    from vhpc.environments.base import Environment, RunResult
    from vhpc.environments.options import EnvOptions
    from vhpc.campaign import execute as campaign

    KINDS.names()  # loaded first: a copy of an unloaded registry would be restored empty
    monkeypatch.setattr(KINDS, "_parts", dict(KINDS._parts))

    class EchoOptions(EnvOptions):
        word: str = "hi"

    class EchoEnvironment(Environment):
        kind = "echo"

        def fingerprint(self):
            return {"kind": "echo"}

        def run(self, argv, env=None, timeout=600.0, key=""):
            return RunResult(returncode=0, stdout="", stderr="", started=0.0, elapsed=0.0)

    @KINDS.register("echo")
    class EchoKind(EnvironmentKind):
        options = EchoOptions

        def build(self, name, options, plan, host):
            return EchoEnvironment(name)

    spec = from_cli(["stream"], ["native", "echo:word=yo"])
    assert spec.environments[1].options.word == "yo"
    envs = campaign.prepare(spec, HOST)
    assert isinstance(envs["echo"], EchoEnvironment) and envs["echo"].benchmark_cpus() >= 1


#: Registered names and the folder (under src/vhpc) that may compare against each.
OWN_FOLDER = {"native": "environments/native", "vm": "environments/vm",
              "vcluster": "environments/vcluster", "ssh": "environments/ssh",
              "qemu": "environments/vm", "libvirt": "environments/vm",
              "local": "executors/local", "slurm": "executors/slurm"}


def kind_name_comparisons(root: Path) -> list[str]:
    """``file:line: expression`` for every comparison (==, !=, in, not in) of a registered kind,
    backend or executor name with an expression about kinds, backends or executors, outside
    that part's own folder and the registries."""
    import ast

    hits = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            names = [c.value for s in sides
                     for c in ([s] if isinstance(s, ast.Constant) else
                               getattr(s, "elts", []) if isinstance(s, (ast.Tuple, ast.List, ast.Set))
                               else [])
                     if isinstance(c, ast.Constant) and c.value in OWN_FOLDER]
            about = " ".join(ast.unparse(s) for s in sides if not isinstance(s, ast.Constant))
            if not re.search(r"kind|backend|executor|KINDS|BACKENDS|EXECUTORS", about):
                continue
            for name in names:
                if not rel.startswith(OWN_FOLDER[name]):
                    hits.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return hits


def test_no_kind_backend_or_executor_name_is_compared_outside_its_own_folder():
    assert kind_name_comparisons(SRC) == []


def test_the_name_check_sees_a_kind_comparison(tmp_path):
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "w.py").write_text(
        "def f(env, b):\n    if env.kind == 'native':\n        return b.backend in ('qemu',)\n")
    (tmp_path / "placement.py").write_text("def g(pol):\n    return pol.mem == 'local'\n")
    hits = kind_name_comparisons(tmp_path)
    assert [h.split(":")[:2] for h in hits] == [["workflows/w.py", "2"], ["workflows/w.py", "3"]]


def test_environment_kind_names_come_from_the_registry():
    for path in (SRC / "environments").rglob("environment.py"):
        assert not re.search(r"^    kind\s*=\s*['\"]", path.read_text(), re.M), path
    host = HostFacts.live()
    assert KINDS.get("native")().build("n", KINDS.get("native").options(), None, host).kind == ""
    from vhpc.environments import kind as kinds
    assert kinds.build("native", "n", KINDS.get("native").options(), host).kind == "native"


# -- capabilities: "the kind that ...", never a kind's name ----------------------------------

#: The hook each capability promises, which its kind must implement (not inherit the refusal).
CAPABILITY_HOOKS = {kinds_mod.GUEST: "estimate_accel", kinds_mod.GUEST_CLUSTER: "node_guests",
                    kinds_mod.IMAGE_BUILDER: "build_image",
                    kinds_mod.REMOTE_MACHINE: "remote_report"}


def test_each_capability_has_one_of_vhpcs_kinds_and_it_implements_the_hook():
    for capability in kinds_mod.CAPABILITIES:
        providers = [n for n, k in KINDS.items() if capability in k.provides]
        assert len(providers) == 1, (capability, providers)
        part = KINDS.providing(capability)
        assert part.name == providers[0]
        hook = CAPABILITY_HOOKS.get(capability)
        if hook:
            assert getattr(part, hook) is not getattr(EnvironmentKind, hook), (capability, hook)
    assert kinds_mod.default_environments() == ("native", "vm")
    assert {c: kinds_mod.kind_name(c) for c in kinds_mod.CAPABILITIES} == {
        "baseline": "native", "guest": "vm", "guest-cluster": "vcluster", "image-builder": "vm",
        "remote-machine": "ssh"}


def test_a_capability_nothing_provides_is_one_line_and_a_plugin_never_displaces_vhpcs(monkeypatch):
    with pytest.raises(NoProvider) as err:
        KINDS.providing("teleport")
    assert isinstance(err.value, SpecError) and "\n" not in str(err.value)
    assert "'teleport'" in str(err.value) and "native" in str(err.value)

    class Impostor(EnvironmentKind):
        provides = frozenset({kinds_mod.BASELINE})

        def build(self, name, options, plan, host):
            raise AssertionError("not built")

    Impostor.name = "impostor"
    # registered first, by a plugin: vhpc's own baseline still answers
    monkeypatch.setattr(KINDS, "_parts", {"impostor": Impostor, **KINDS._parts})
    monkeypatch.setattr(KINDS, "_guests", {**KINDS._guests, "impostor": "a plugin"})
    assert KINDS.providing(kinds_mod.BASELINE).name == "native"


def test_a_campaign_without_environments_compares_the_baseline_and_one_guest(tmp_path):
    from vhpc.spec.parse import from_file

    path = tmp_path / "c.yaml"
    path.write_text("benchmarks: [stream]\n")
    spec = from_file(path)
    assert [(e.kind, e.name) for e in spec.environments] == [("native", "native"), ("vm", "vm")]
    assert spec.baseline == "native"


#: Kinds' names, quoted: what a room outside the kind's own folder must not write.
KIND_LITERAL = re.compile(r"""["'](vm|ssh|vcluster|native)["']""")


def kind_names_outside_their_folders(root: Path, folders: dict[str, str]) -> list[str]:
    """``file:line: 'name'`` for every string constant equal to a kind's name (``folders``: name
    → the kind's own folder, relative to ``root``) in a module outside the kinds' folders
    (inside them a name may also be a tool's, ``ssh``, or a stored field's).  Fragments of
    f-strings (``f"vm{i}"``: a label) are not names and are left out."""
    import ast

    hits = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if any(rel.startswith(folder + "/") for folder in folders.values()):
            continue
        tree = ast.parse(path.read_text(), str(path))
        fragments = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        hits += [f"{rel}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                 if isinstance(node, ast.Constant) and isinstance(node.value, str)
                 and node.value in folders and id(node) not in fragments]
    return sorted(hits, key=lambda h: (h.split(":")[0], int(h.split(":")[1]), h))


def vhpc_kind_folders() -> dict[str, str]:
    """Each of vhpc's own kinds → its folder under src/vhpc (from the registered class)."""
    return {name: "/".join(part.__module__.split(".")[1:3]) for name, part in KINDS.items()
            if part.__module__.startswith("vhpc.environments.")}


def test_no_kind_is_named_outside_its_own_folder():
    folders = vhpc_kind_folders()
    assert folders == {"native": "environments/native", "ssh": "environments/ssh",
                       "vm": "environments/vm", "vcluster": "environments/vcluster"}
    assert kind_names_outside_their_folders(SRC, folders) == []
    # the grep, over the same tree: it agrees
    grep = [f"{p.relative_to(SRC)}:{i}" for p in sorted(SRC.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts
            and not any(p.relative_to(SRC).as_posix().startswith(f + "/") for f in folders.values())
            for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
            if KIND_LITERAL.search(line)]
    assert grep == []


def test_the_kind_name_check_sees_a_named_kind(tmp_path):
    (tmp_path / "campaign").mkdir()
    (tmp_path / "environments" / "vm").mkdir(parents=True)
    (tmp_path / "campaign" / "s.py").write_text(
        "def f(env, i):\n    label = f'vm{i}'\n    return env('vm', label), \"native\"\n")
    (tmp_path / "environments" / "vm" / "k.py").write_text("NAME = 'vm'\n")
    hits = kind_names_outside_their_folders(tmp_path, {"vm": "environments/vm",
                                                       "native": "environments/native"})
    assert sorted(hits) == ["campaign/s.py:3: 'native'", "campaign/s.py:3: 'vm'"]
