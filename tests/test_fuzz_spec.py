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
    signal.alarm(120)  # a cyclic document used to hang the walk of its values
    try:
        rc = cli.main(["run", "--dry-run", str(f)])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = capsys.readouterr().err
    assert rc in (0, 2)
    if rc == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith("vhpc: error:")
