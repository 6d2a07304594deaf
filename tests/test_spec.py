"""Campaign specs from CLI strings and YAML files: validation and one-line errors."""

import pytest

from vhpc import spec
from vhpc.spec import SpecError


def test_cli_items_parse_into_one_campaign_object():
    s = spec.from_cli(["stream:n=100000,ntimes=4", "pingpong"],
                      ["native", "vm:vcpus=2,pin=0,1,memory=512"], repeats=3, warmup=None)
    assert [b.name for b in s.benchmarks] == ["stream", "pingpong"]
    assert s.benchmarks[0].params == {"n": 100000, "ntimes": 4}
    assert s.benchmarks[0].key == "n=100000,ntimes=4"
    vm = s.environments[1]
    assert (vm.kind, vm.name) == ("vm", "vm")
    assert vm.options == {"vcpus": 2, "pin": "0,1", "memory": 512}
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
    (["stream"], ["native", "vm:cpus=1"], "unknown option(s) cpus"),
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
    from vhpc import campaign
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
    s = spec.from_cli(["noise"], ["native", "vm", "vm:strict=0,name=lax"], strict_placement=True)
    assert [e.options.get("strict") for e in s.environments] == [None, 1, 0]


def test_corunner_option_is_validated_when_the_environment_is_made():
    from vhpc import campaign

    s = spec.from_cli(["stream"], ["native", "vm:corunner=extreme"])
    with pytest.raises(SpecError, match="corunner='extreme': use low, medium or high"):
        campaign.make_environment(s.environments[1])
