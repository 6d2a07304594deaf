"""Property test (hypothesis): generated ``-b``/``-e`` items, protocol flags and
campaign documents, through the spec parser and the in-process CLI (``--dry-run``).  Nothing
may escape but the project's one-line user error (VhpcError, exit status 2).

Bounded: a fixed number of examples per property, no deadline (the machine is shared)."""

import signal
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vhpc import benchmarks, cli
from vhpc.environments.native.options import NativeOptions
from vhpc.environments.vm.options import VmOptions
from vhpc.campaign import execute as campaign
from vhpc.spec import parse as spec
from vhpc.core.errors import VhpcError

FAST = settings(max_examples=200, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

NAMES = sorted(benchmarks.REGISTRY)
PARAMS = sorted({p.name for b in benchmarks.REGISTRY.values() for p in b.params})
OPTIONS = sorted({"name", *NativeOptions.model_fields, *VmOptions.model_fields})

numbers = st.one_of(st.integers(-10**30, 10**30), st.floats(allow_nan=True, allow_infinity=True),
                    st.integers(-10**60, 10**60))  # beyond 2**63 (no C integer holds them)
words = st.sampled_from(["auto", "none", "hidden", "mirror", "4k", "2m", "low", "tcg", "float",
                         "span:2", "nodes:0,1;mem=local", "map:0-1=0,1", "0-1", "0,1", "1-0",
                         "n0", ".inf", "-.inf", ".nan", "1e400", "-3", "0", "", "0:1", "[1, 2]",
                         "{a: 1}", "~", "yes", "\x00", "é", "9" * 40,
                         # full-width and other non-ASCII digits (int() reads them), NUL inside text
                         "１２", "٣", "０-1", "span:２", "1\x002", "echo\x00x"])
# mostly plausible values (so many items parse and reach the dry run), some hostile ones
small = st.integers(0, 4096).map(str)
values = st.one_of(small, small, small, words, numbers.map(str), st.text(max_size=8))


def item(name, keys):
    """``NAME:k=v,...`` with the item's own keys (and now and then a foreign one)."""
    own = st.sampled_from(keys or PARAMS)
    key = st.one_of(own, own, own, own, st.sampled_from(PARAMS + OPTIONS))
    pairs = st.lists(st.tuples(key, values), max_size=3, unique_by=lambda kv: kv[0])
    return pairs.map(lambda kv: name + (":" + ",".join(f"{k}={v}" for k, v in kv) if kv else ""))


junk = st.text(max_size=16)
bench_items = st.one_of(*[item(b.name, [p.name for p in b.params])
                          for b in benchmarks.REGISTRY.values() if b.name != "npb-external"], junk)
env_items = st.one_of(item("native", list(NativeOptions.model_fields)),
                      item("vm", ["name", *VmOptions.model_fields]), junk)
scalars = st.one_of(st.none(), st.booleans(), numbers, words, st.text(max_size=10))
# keys: mostly known names, some text, and keys that are not text at all
keys = st.one_of(st.sampled_from(PARAMS + OPTIONS + list(spec.CampaignSpec.model_fields)
                                 + NAMES + ["native", "vm"]), st.text(max_size=6),
                 st.integers(-10**30, 10**30), st.none(), st.booleans(), st.floats())
documents = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(keys, inner, max_size=4)), max_leaves=25)
# custom benchmarks: commands and env with NUL bytes, huge timeouts, bad keys
customs = st.lists(st.fixed_dictionaries(
    {"name": st.sampled_from(["probe", "p2", "1x", ""]),
     "command": st.one_of(st.lists(st.sampled_from(["true", "echo", "v 1", "a\x00b", "１"]),
                                   min_size=1, max_size=3),
                          st.sampled_from(["echo v 1", "echo\x00v", "'"])),
     "metrics": st.just([{"name": "v", "regex": "v (\\d+)", "higher_is_better": True}])},
    optional={"env": st.dictionaries(st.one_of(st.sampled_from(["X", "A\x00"]), st.integers()),
                                     st.one_of(st.sampled_from(["1", "a\x00b"]), numbers),
                                     max_size=2),
              "timeout": st.one_of(numbers, st.sampled_from(["１", "2"]))}), max_size=2)
campaign_docs = st.fixed_dictionaries(
    {"benchmarks": st.lists(st.one_of(bench_items, st.dictionaries(st.sampled_from(NAMES),
                                                                     documents, max_size=1)),
                            max_size=3),
     "environments": st.lists(st.one_of(env_items, st.dictionaries(
         st.sampled_from(["native", "vm"]), documents, max_size=1)), max_size=3)},
    optional={**{k: documents for k in ("repeats", "warmup", "timeout", "protocol", "host_knobs",
                                        "target_ci", "baseline")},
              "custom": st.one_of(documents, customs),
              "executor": st.sampled_from(["local", "slurm:nodes=１２", "slurm:nodes=2",
                                           "slurm:nodes=" + "9" * 30, "slurm:time=1\x00"])})


@pytest.fixture(scope="module")
def quiet_host():
    """Host facts read once (lstopo), and no host-knob journal recovery in-process."""
    host = campaign.host_facts()
    with mock.patch.object(campaign, "host_facts", lambda *a: host), \
            mock.patch("vhpc.host.knobs.recover", lambda *a: []):
        yield


@FAST
@given(benches=st.lists(bench_items, min_size=1, max_size=3),
       envs=st.lists(env_items, min_size=1, max_size=3))
def test_cli_items_parse_or_raise_one_user_error(benches, envs):
    try:
        s = spec.from_cli(benches, ["native"] + envs)
    except VhpcError as exc:
        assert "\n" not in str(exc)
    else:
        assert spec.CampaignSpec.model_validate_json(s.model_dump_json()) == s


@FAST
@given(benches=st.lists(bench_items, min_size=1, max_size=2),
       envs=st.lists(env_items, max_size=2),
       flags=st.lists(st.tuples(st.sampled_from(["--repeats", "--warmup", "--timeout",
                                                 "--target-ci", "--session-trials", "--order"]),
                                values), max_size=2))
def test_cli_dry_run_exits_0_or_2(quiet_host, capsys, benches, envs, flags):
    argv = ["compare", "--dry-run"] + [a for b in benches for a in ("-b", b)]
    argv += [a for e in ["native"] + envs for a in ("-e", e)] + [a for f in flags for a in f]
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert rc in (0, 2)
    if rc == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith("vhpc: error:")


@FAST
@given(doc=st.one_of(campaign_docs, documents))
def test_campaign_documents_run_dry_or_give_one_line(quiet_host, capsys, tmp_path_factory, doc):
    f = tmp_path_factory.mktemp("doc") / "c.yaml"
    f.write_text(yaml.safe_dump(doc))
    rc = cli.main(["run", "--dry-run", str(f)])
    err = capsys.readouterr().err
    assert rc in (0, 2)
    if rc == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith("vhpc: error:")


@settings(max_examples=60, deadline=None, derandomize=True)
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_raw_files_read_or_give_one_user_error(tmp_path_factory, raw):
    f = tmp_path_factory.mktemp("raw") / "c.yaml"
    f.write_bytes(raw)
    try:
        spec.from_file(f)
    except VhpcError as exc:
        assert "\n" not in str(exc)


# anchors and aliases (what a YAML bomb is made of), including aliases that refer to the node
# holding them (``a: &a [*a]``, a cycle) and aliases of aliases; written as YAML text, since
# safe_dump never writes a cycle
anchor_names = st.sampled_from(["a", "b", "c"])


@st.composite
def aliased_texts(draw):
    """A YAML flow document whose nodes carry anchors and aliases, some of them cyclic."""
    defined: list[str] = []

    def node(depth: int) -> str:
        kind = draw(st.sampled_from(["scalar", "alias", "list", "map"] if depth < 4
                                    else ["scalar", "alias"]))
        if kind == "alias":
            return "*" + draw(anchor_names) if defined or draw(st.booleans()) else "1"
        anchor = draw(st.one_of(st.none(), anchor_names))
        prefix = f"&{anchor} " if anchor else ""
        if kind == "scalar":
            body = draw(st.sampled_from(["1", "stream", "native", "x", "'[/y]'", "~"]))
        elif kind == "list":
            if anchor:  # opened: an alias inside may refer to it
                defined.append(anchor)
            body = "[" + ", ".join(node(depth + 1) for _ in range(draw(st.integers(0, 3)))) + "]"
        else:
            if anchor:
                defined.append(anchor)
            keys = draw(st.lists(st.sampled_from(["benchmarks", "environments", "repeats", "k"]),
                                 unique=True, max_size=3))
            body = "{" + ", ".join(f"{k}: {node(depth + 1)}" for k in keys) + "}"
        if anchor and kind == "scalar":
            defined.append(anchor)
        return prefix + body

    return node(0) + "\n"


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=aliased_texts())
def test_yaml_anchors_and_aliases_read_or_give_one_line(quiet_host, capsys, tmp_path_factory,
                                                        text):
    f = tmp_path_factory.mktemp("alias") / "c.yaml"
    f.write_text(text)

    def hung(*_):
        raise TimeoutError(f"vhpc run --dry-run hangs on {text!r}")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)  # a cyclic document must not hang the walk of its values
    try:
        rc = cli.main(["run", "--dry-run", str(f)])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = capsys.readouterr().err
    assert rc in (0, 2)
    if rc == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith("vhpc: error:")


# ------------------------------------------------------------------------------------------
# The full fuzz run: >= 3,000 command lines over every subcommand and >= 1,000
# campaign files, seeded (derandomize), each bounded in time: 0 tracebacks and 0 hangs.  Minutes
# on a 2-core host, so marked ``heavy``: run by ``make bench``, deselected elsewhere (conftest).

FUZZ_ARGV = 3000
FUZZ_FILES = 1000
#: seconds one command may take before it counts as a hang
FUZZ_HANG_S = 60


class WouldRun(BaseException):
    """Raised where a command would start real work (environments prepared, a calibration, an
    image build): the command line was accepted; the fuzz run measures nothing."""


def _subcommands():
    """{command: (optional actions, positional actions)} read off vhpc's own parser, so a new
    flag is fuzzed without this file edited; ``image`` as ``image build``."""
    import argparse

    def split(parser):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return subs[0].choices if subs else None

    out = {}
    for name, sp in split(cli.build_parser()).items():
        nested = split(sp)
        for sub_name, target in (nested.items() if nested else [("", sp)]):
            opts = [a for a in target._actions if a.option_strings and "-h" not in a.option_strings]
            pos = [a for a in target._actions if not a.option_strings
                   and not isinstance(a, argparse._SubParsersAction)]
            out[" ".join(filter(None, [name, sub_name]))] = (opts, pos)
    return out


@pytest.fixture(scope="module")
def fuzz_world(tmp_path_factory, finished):
    """The files command lines name: a FIFO, a folder, garbage, a campaign file, a finished
    store (its id), a store that is a FIFO; real work replaced by :class:`WouldRun`; the KVM
    probe answered without a guest; a private cache and working folder."""
    import os

    from vhpc.environments.vm import VmKind
    from vhpc.environments.vm.backends.base import ProbeResult
    from vhpc.workflows import calibrate

    tmp = tmp_path_factory.mktemp("fuzz")
    os.mkfifo(tmp / "fifo")
    (tmp / "folder").mkdir()
    (tmp / "garbage").write_bytes(b"\xff\xfe\x00garbage")
    (tmp / "c.yaml").write_text("benchmarks: [stream]\nenvironments: [native]\n")
    (tmp / "fifostore").mkdir()
    os.mkfifo(tmp / "fifostore" / "vhpc.db")
    out, cid = finished

    def would_run(*_a, **_k):
        raise WouldRun

    with mock.patch.object(campaign, "prepare", would_run), \
            mock.patch.object(calibrate, "run", would_run), \
            mock.patch.object(VmKind, "build_image", would_run), \
            mock.patch.object(VmKind, "probe_accel",
                              staticmethod(lambda *a, **k: ProbeResult("tcg", "fuzz: not probed"))), \
            mock.patch.dict(os.environ, {"VHPC_CACHE": str(tmp / "cache")}):
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            yield {"tmp": tmp, "out": out, "cid": cid}
        finally:
            os.chdir(cwd)


def _values(world):
    """Argument values: plausible ones (so commands get past parsing) and hostile ones."""
    tmp, out, cid = world["tmp"], world["out"], world["cid"]
    paths = [tmp / "fifo", tmp / "folder", tmp / "garbage", tmp / "c.yaml", tmp / "fifostore",
             out, tmp / "none" / "x", "/dev/zero", "/dev/null"]
    return st.one_of(
        st.sampled_from([str(p) for p in paths]),
        st.sampled_from([cid, "20000101-000000-0000", "stream", "native", "vm", "vm:vcpus=2",
                         "noise:duration=0.1", "native:cpus=0", "ssh:host=-oProxyCommand=x",
                         f"vm:image={tmp / 'fifo'}", "vm:image=/etc/shadow", "slurm:nodes=2",
                         "pack:2 numa:1 core:2 pu:1", "pack:999999 pu:999999", "cold-warm",
                         "000", "scaling", "benchmarks", "campaigns", "build", "5%", "-5%",
                         "5e-1%", "0.05", "2", "0", "-1", "1e400", "nan", "inf", "３", "٣",
                         "9" * 40, " ", "", "-", "--", "a,b", "x=y", "é", "\t", "a\nb"]),
        values.filter(lambda v: "\x00" not in v),  # a real argv never holds NUL (execve(2))
        st.text(alphabet=st.characters(blacklist_characters="\x00"), max_size=12))


@st.composite
def command_lines(draw, world):
    """One ``vhpc`` argv: a subcommand, some of its options (choices mostly valid), its
    positionals, now and then a global flag, a stray option or a value-less flag."""
    subs = _subcommands()
    name = draw(st.sampled_from(sorted(subs)))
    opts, pos = subs[name]
    vals = _values(world)
    argv = draw(st.lists(st.sampled_from(["--share", "--allow-system-image"]), max_size=1))
    argv += name.split()
    for a in draw(st.lists(st.sampled_from(opts), max_size=5)) if opts else []:
        argv.append(draw(st.sampled_from(a.option_strings)))
        if a.nargs == 0:
            continue
        if a.choices and draw(st.integers(0, 3)):
            argv.append(str(draw(st.sampled_from(list(a.choices)))))
        elif draw(st.integers(0, 19)):  # a value left out, now and then
            argv.append(draw(vals))
    for a in pos:
        if draw(st.integers(0, 9)):
            argv.append(str(draw(st.sampled_from(list(a.choices)))) if a.choices
                        and draw(st.booleans()) else draw(vals))
    if draw(st.integers(0, 9)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(st.sampled_from(
            ["--no-such-flag", "--help", "-h", "--version", "--dry-run", "--out"])))
    return argv


def _bounded_main(argv) -> tuple[int | str, str]:
    """(exit status or "accepted", stderr) of ``vhpc ARGV`` in this process; a hang past
    :data:`FUZZ_HANG_S` raises TimeoutError, any other exception escapes (a traceback)."""
    def hung(*_):
        raise TimeoutError(f"vhpc {argv!r} still running after {FUZZ_HANG_S} s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(FUZZ_HANG_S)
    try:
        return cli.main(argv), ""
    except WouldRun:
        return "accepted", ""
    except SystemExit as exc:  # argparse's --help and --version
        return exc.code, ""
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _judge(rc, err: str, what) -> None:
    assert rc in (0, 1, 2, "accepted"), (what, rc, err[-2000:])
    if rc == 2 and err:
        lines = err.strip().splitlines()
        assert lines[-1].startswith("vhpc: error:") and "Traceback" not in err, (what, err)


@pytest.mark.heavy
def test_fuzz_command_lines(fuzz_world, capsys):
    @settings(max_examples=FUZZ_ARGV, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(argv=command_lines(fuzz_world))
    def one(argv):
        rc, _ = _bounded_main(argv)
        _judge(rc, capsys.readouterr().err, argv)

    one()


@pytest.mark.heavy
def test_fuzz_campaign_files(fuzz_world, capsys, quiet_host):
    folder = fuzz_world["tmp"] / "docs"
    folder.mkdir(exist_ok=True)

    @settings(max_examples=FUZZ_FILES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(doc=st.one_of(campaign_docs, documents, aliased_texts(), st.binary(max_size=300)))
    def one(doc):
        f = folder / "c.yaml"
        if isinstance(doc, bytes):
            f.write_bytes(doc)
        else:
            f.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
        for argv in (["run", "--dry-run", str(f)], ["run", str(f), "--out", str(folder / "o")]):
            rc, _ = _bounded_main(argv)
            _judge(rc, capsys.readouterr().err, (argv[:2], doc))

    one()
