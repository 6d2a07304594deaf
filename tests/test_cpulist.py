"""The one CPU/node list parser (cpuset(7) "cpulist" format), used by every room."""

from __future__ import annotations

import pytest

from vhpc.core.cpulist import format_cpu_list, parse_cpu_list, runs
from vhpc.topology import format_list, parse_list


def test_sorted_set_and_ordered_forms():
    assert parse_cpu_list("8,0-3,10-11,2") == (0, 1, 2, 3, 8, 10, 11)
    assert parse_cpu_list("1,0,1", ordered=True) == (1, 0, 1)
    assert parse_cpu_list("0-1;4", ordered=True, sep=",;") == (0, 1, 4)
    assert format_cpu_list([5, 0, 1, 2, 8]) == "0-2,5,8" and format_cpu_list([]) == ""
    assert runs([3, 1, 2, 7]) == [(1, 3), (7, 7)]


@pytest.mark.parametrize("bad", ["", "3-1", "a", "-2", "1-x", ","])
def test_bad_lists_raise_one_line(bad):
    with pytest.raises(ValueError) as exc:
        parse_cpu_list(bad)
    assert "\n" not in str(exc.value) and "0-3,8" in str(exc.value)


def test_old_names_are_the_same_parser():
    assert parse_list("0-2,1") == parse_cpu_list("0-2,1") and format_list([0, 1]) == "0-1"
    assert parse_cpu_list("1,0", ordered=True) == (1, 0)
    with pytest.raises(ValueError, match="bad index list item '3-1'"):
        parse_cpu_list("3-1", ordered=True)
