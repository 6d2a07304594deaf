"""Campaign specs from CLI strings and YAML files: validation and one-line errors."""

import pytest

from vhpc.spec import parse as spec
from vhpc.spec.parse import SpecError


def test_cli_items_parse_into_one_campaign_object():
    s = spec.from_cli(["stream:n=100000,ntimes=4", "pingpong"],
                      ["native", "vm:vcpus=2,pin=0,1,memory=512"], repeats=3, warmup=None)
    assert [b.name for b in s.benchmarks] == ["stream", "pingpong"]
    assert s.benchmarks[0].params == {"n": 100000, "ntimes": 4}
    assert s.benchmarks[0].key == "n=100000,ntimes=4"
    vm = s.environments[1]
    assert (vm.kind, vm.name) == ("vm", "vm")
    assert vm.options.given() == {"vcpus": 2, "pin": "0,1", "memory": 512}
    assert vm.options.pin == (0, 1) and vm.options.vcpus == 2
    assert s.repeats == 3 and s.warmup == 1 and s.baseline == "native"


def test_two_vms_get_distinct_names():
    s = spec.from_cli(["noise"], ["native", "vm", "vm:pin=none"])
    assert [e.name for e in s.environments] == ["native", "vm", "vm2"]


def test_yaml_and_cli_compile_to_the_same_campaign(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("repeats: 3\nbenchmarks:\n  - stream: {n: 100000, ntimes: 4}\n  - pingpong\n"
                 "environments:\n  - native\n  - vm: {vcpus: 2, pin: '0,1', memory: 512}\n")
    a = spec.from_file(f)
    b = spec.from_cli(["stream:n=100000,ntimes=4", "pingpong"],
                      ["native", "vm:vcpus=2,pin=0,1,memory=512"], repeats=3)
    assert a == b


@pytest.mark.parametrize("benches,envs,needle", [
    (["strem"], ["native"], "unknown benchmark 'strem'"),
    (["stream:x=1"], ["native"], "unknown parameter 'x'"),
    (["stream:n=abc"], ["native"], "not a valid int"),
    (["stream:n=10"], ["native"], "below the minimum"),
    (["pingpong:ranks=3"], ["native"], "choose one of 2"),
    (["stream"], ["native", "kvm"], "unknown environment 'kvm'"),
    (["stream"], ["native", "vm:cpus=1"], "unknown option 'cpus'"),
    (["stream"], ["vm", "vm:name=b"], "baseline 'native' is not one of the environments"),
    (["stream", "stream"], ["native"], "listed twice"),
])
def test_cli_errors_are_one_line_and_say_what_to_change(benches, envs, needle):
    with pytest.raises(SpecError) as exc:
        spec.from_cli(benches, envs)
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg


def test_file_errors_name_the_file_and_key(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("repeats: 0\nbenchmarks: [stream]\nenvironments: [native]\n")
    with pytest.raises(SpecError, match=r"bad.yaml: repeats: .*greater than or equal to 1"):
        spec.from_file(f)
    f.write_text("benchmarks: [stream]\nrepeat: 3\n")
    with pytest.raises(SpecError, match=r"bad.yaml: repeat: Extra inputs"):
        spec.from_file(f)
    f.write_text("benchmarks: [stream\n")
    with pytest.raises(SpecError, match=r"bad.yaml: not valid YAML"):
        spec.from_file(f)
    with pytest.raises(SpecError, match="cannot read"):
        spec.from_file(tmp_path / "missing.yaml")


def test_custom_benchmark_from_a_campaign_file_runs_like_a_builtin(tmp_path):
    from vhpc.campaign import execute as campaign
    from vhpc.store import Store

    f = tmp_path / "c.yaml"
    f.write_text(
        "custom:\n"
        "  - name: echo-bench\n"
        "    command: [sh, -c, 'echo took 0.25 s; echo PASSED']\n"
        "    metrics: [{name: time, regex: 'took (\\S+) s', unit: s, higher_is_better: false}]\n"
        "    success: PASSED\n"
        "repeats: 2\nwarmup: 0\nbenchmarks: [echo-bench]\nenvironments: [native]\n")
    s = spec.from_file(f)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    assert campaign.execute(store, cid) == {"done": 2, "failed": 0}
    obs = store.observations(cid)
    assert [(o.metric, o.value, o.unit, o.valid) for o in obs] == [("time", 0.25, "s", True)] * 2


def test_custom_benchmark_may_not_shadow_a_builtin(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("custom:\n  - name: stream\n    command: 'true'\n"
                 "    metrics: [{name: t, regex: '(x)', unit: s, higher_is_better: false}]\n"
                 "benchmarks: [stream]\nenvironments: [native]\n")
    with pytest.raises(SpecError, match="clashes with a built-in"):
        spec.from_file(f)


def test_strict_placement_flag_applies_to_every_vm_unless_set():
    # native has strict too: its nodes=/membind= binding is read back (docs/campaigns.md)
    s = spec.from_cli(["noise"], ["native", "vm", "vm:strict=0,name=lax"], strict_placement=True)
    assert [e.options.given().get("strict") for e in s.environments] == [True, True, False]


def test_corunner_option_is_validated_when_the_spec_is_parsed():
    with pytest.raises(SpecError, match="corunner: Input should be 'low', 'medium' or 'high' "
                                        r"\(got 'extreme'\)"):
        spec.from_cli(["stream"], ["native", "vm:corunner=extreme"])


def test_parsing_never_touches_the_host(monkeypatch):
    import os
    import shutil
    import subprocess

    from vhpc import topology

    def forbidden(*a, **k):
        raise AssertionError("the host was probed while parsing")

    for obj, name in ((shutil, "which"), (subprocess, "run"), (subprocess, "Popen"),
                      (os, "sched_getaffinity"), (topology, "load")):
        monkeypatch.setattr(obj, name, forbidden)
    s = spec.from_cli(["stream"], ["native:cpus=0", "vm:vcpus=3,policy=span:2,numa=mirror",
                                   "vm:pin=1,0,vcpus=2,corunner=high"])
    assert s.environments[1].options.policy.name == "span"
    assert s.environments[2].options.pin == (1, 0)


def test_custom_benchmarks_live_in_the_spec_not_the_global_registry(tmp_path):
    from vhpc import benchmarks

    f = tmp_path / "c.yaml"
    f.write_text("custom:\n  - name: mine\n    command: 'true'\n"
                 "    metrics: [{name: t, regex: 't=(\\S+)', unit: s, higher_is_better: false}]\n"
                 "benchmarks: [mine]\nenvironments: [native]\n")
    s = spec.from_file(f)
    assert "mine" not in benchmarks.REGISTRY
    assert s.benchmark("mine").name == "mine"
    again = spec.CampaignSpec.model_validate_json(s.model_dump_json())
    assert again == s and again.benchmark("mine").name == "mine"


def test_a_stored_spec_in_the_old_text_form_reloads_to_typed_options():
    old = {"benchmarks": [{"name": "stream", "params": {"n": 100000}}],
           "environments": [{"kind": "native", "name": "native", "options": {"cpus": "0-1"}},
                            {"kind": "vm", "name": "vm", "options": {
                                "vcpus": 2, "pin": "1,0", "strict": 1, "numa": 2,
                                "corunner": "low", "corunner_policy": "map:0-1=0,1"}}]}
    s = spec.CampaignSpec.model_validate(old)
    native, vm = (e.options for e in s.environments)
    assert native.cpus == (0, 1)
    assert (vm.pin, vm.strict, vm.numa, vm.corunner_policy.name) == ((1, 0), True, 2, "map")
    assert spec.CampaignSpec.model_validate_json(s.model_dump_json()) == s


def test_a_new_environment_kind_slots_in_with_one_registration(monkeypatch):
    from vhpc.environments.kind import KINDS, EnvironmentKind
    from vhpc.environments.options import EnvOptions

    class RemoteOptions(EnvOptions):
        host: str
        port: int = 22

    @KINDS.register("remote")
    class RemoteKind(EnvironmentKind):
        options = RemoteOptions

        def build(self, name, options, plan, host):
            raise NotImplementedError

    KINDS.names()  # loaded first: a copy of an unloaded registry would be restored empty
    monkeypatch.setattr(KINDS, "_parts", dict(KINDS._parts))  # undone after the test
    KINDS.unregister("remote")
    KINDS.register("remote")(RemoteKind)
    s = spec.from_cli(["noise"], ["native", "remote:host=node1,port=2222"])
    assert s.environments[1].options == RemoteOptions(host="node1", port=2222)
    with pytest.raises(SpecError, match="port: Input should be a valid integer"):
        spec.from_cli(["noise"], ["native", "remote:host=a,port=x"])


def test_values_with_commas_split_only_before_declared_options():
    s = spec.from_cli(["noise"], ["native", "vm:policy=nodes:0,1;mem=local,vcpus=2,name=a",
                                  "vm:pin=0,1,vcpus=2"])
    a, b = s.environments[1:]
    assert (a.name, a.options.policy.text, a.options.vcpus) == ("a", "nodes:0,1;mem=local", 2)
    assert b.options.pin == (0, 1)
    with pytest.raises(SpecError, match="unknown option 'bogus'"):
        spec.from_cli(["noise"], ["native", "vm:vcpus=2,bogus=1"])
