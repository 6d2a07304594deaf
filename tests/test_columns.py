"""Observations as columns (:class:`vhpc.core.metrics.ObservationColumns`): the store's
:meth:`~vhpc.store.Store.observation_columns` holds exactly the rows of its
:meth:`~vhpc.store.Store.observations`, in order, and refuses the same damaged rows; the
analysis of either form is the same."""

from __future__ import annotations

import math
import sqlite3

import pytest

from vhpc.analysis import analyse
from vhpc.core.metrics import EnvInfo, Observation, ObservationColumns, Sample
from vhpc.store import Store
from vhpc.storefile import StoreError

ENVS = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "kvm")}


def stored(tmp_path) -> tuple[Store, str]:
    store = Store(tmp_path / "vhpc.db")
    trials = [{"seq": i, "round": i // 2, "warmup": i == 0, "environment": env,
               "benchmark": "b", "params": "n=1"} for i, env in enumerate(
                   ["native", "native", "vm", "native", "vm", "vm"])]
    store.create_campaign("c1", "{}", "test", trials, [{"name": "native", "kind": "native"},
                                                         {"name": "vm", "kind": "vm"}])
    for t in store.unfinished("c1"):
        v = 1.0 + t.seq / 10
        store.replace_samples(t.id, "done", [Sample("t", v, "s", False),
                                             Sample("bw", 10 / v, "GB/s", True, t.seq != 4)],
                             None)
    return store, "c1"


def test_the_store_columns_hold_the_observations_rows(tmp_path):
    store, cid = stored(tmp_path)
    obs = store.observations(cid)
    cols = store.observation_columns(cid)
    assert len(cols) == len(obs) == 12
    assert list(cols) == obs
    assert analyse(cols, ENVS, "native").to_dict() == analyse(obs, ENVS, "native").to_dict()


def test_columns_from_observations_keep_none_and_order():
    obs = [Observation("vm", "b", "", "t", "s", False, None, True, False, 1, 0, 0),
           Observation("native", "b", "", "t", "s", False, 2.0, False, True, 2, 1, None)]
    cols = ObservationColumns.from_observations(obs)
    assert cols.text("environment") == ["vm", "native"]
    assert math.isnan(cols.value[0]) and cols.value[1] == 2.0
    back = list(cols)
    assert back[1] == obs[1] and back[0].session_index == 0 and math.isnan(back[0].value)
    assert len(ObservationColumns.from_observations([])) == 0


@pytest.mark.parametrize("column,value,needle", [
    ("value", "'x'", "is not a number"), ("metric", "x'07'", "has a name that is not text")])
def test_a_damaged_sample_is_refused_by_both_reads(tmp_path, column, value, needle):
    store, cid = stored(tmp_path)
    store.close()
    db = sqlite3.connect(tmp_path / "vhpc.db")
    db.execute(f"UPDATE samples SET {column}={value} WHERE id=3")
    db.commit()
    db.close()
    store = Store(tmp_path / "vhpc.db", existing=True)
    for read in (store.observations, store.observation_columns):
        with pytest.raises(StoreError, match=needle):
            read(cid)


def test_no_observation_or_only_warm_ups_make_no_group():
    warm = [Observation("native", "b", "", "t", "s", False, 1.0, True, True, 1)]
    for obs in ([], warm):
        a = analyse(obs, ENVS, "native")
        assert a.summaries == [] and a.comparisons == []
