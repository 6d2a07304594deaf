"""group_observations (one loop over plain lists, for speed) groups exactly as Group.add does one
observation at a time: warm-up skipped, invalid and non-finite values counted, cold/warm split
only where session indices exist."""

from __future__ import annotations

import math
import random

from vhpc.analysis.summaries import Group, group_observations
from vhpc.core.metrics import Observation


def _by_add(observations):
    groups = {}
    for o in observations:
        if o.warmup:
            continue
        key = (o.benchmark, o.params, o.metric, o.environment)
        g = groups.setdefault(key, Group(o.unit, o.higher_is_better))
        v = o.value
        g.add(v, bool(o.valid and v is not None and math.isfinite(v)), o.session_index)
    return groups


def test_grouping_equals_adding_one_at_a_time():
    rng = random.Random(7)
    obs = []
    for i in range(4000):
        env = rng.choice(["native", "vm", "vm2"])
        value = rng.choice([rng.random(), rng.random(), math.nan, math.inf, None, 0.0])
        session = None if env == "native" else rng.choice([0, 1, 2, None])
        obs.append(Observation(env, rng.choice(["a", "b"]), rng.choice(["", "n=1"]),
                               rng.choice(["t", "bw"]), "s", rng.random() < 0.5, value,
                               rng.random() < 0.9, rng.random() < 0.05, i, i // 50, session))
    obs.append(Observation("vm3", "a", "", "t", "s", False, 1.0, True, False, 9999, 0, 1))
    want, got = _by_add(obs), group_observations(iter(obs))
    assert list(got) == list(want)
    for key, g in want.items():
        h = got[key]
        assert (h.unit, h.hib, h.sessions) == (g.unit, g.hib, g.sessions), key
        assert h.values == g.values and h.invalid == g.invalid, key
    assert got[("a", "", "t", "vm3")].values == {"all": [1.0], "warm": [1.0]}
    assert not any(g.sessions for k, g in got.items() if k[3] == "native")
