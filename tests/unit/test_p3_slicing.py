"""P3's slicing plan (program/p3/p3_slicing.py, shared with the engine-side training script)."""
import sys

import pytest

from support.ckcli import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "program" / "p3"))
from p3_slicing import DEFAULT_SLICE_SIZE, plan_slices, server_of  # noqa: E402

AWKWARD = [
    ([1], 50_000),  # a scalar
    ([50_000], 50_000),  # exactly one slice
    ([50_001], 50_000),  # one element over
    ([7, 3, 123_457, 1, 100_000], 50_000),
    ([9, 10, 11], 3),
    ([5, 5], 1),
    ([2_359_296, 512, 4_096_000], DEFAULT_SLICE_SIZE),  # ResNet-50-like layers
]


@pytest.mark.parametrize("sizes,slice_size", AWKWARD)
def test_slices_cover_every_element_exactly_once(sizes, slice_size):
    slices = plan_slices(sizes, slice_size)
    covered = {index: [0] * size for index, size in enumerate(sizes)}
    for s in slices:
        assert 0 < s.size <= slice_size
        for element in range(s.start, s.stop):
            covered[s.param][element] += 1
    assert all(count == 1 for counts in covered.values() for count in counts)
    assert len({s.key for s in slices}) == len(slices)


def test_no_slicing_keeps_every_parameter_whole():
    slices = plan_slices([7, 123_457, 1], 0)
    assert [(s.param, s.start, s.stop) for s in slices] == [(0, 0, 7), (1, 0, 123_457), (2, 0, 1)]


def test_layers_nearer_the_input_get_higher_priority_unless_disabled():
    slices = plan_slices([4, 4, 4], 2)
    assert [s.priority for s in slices] == [0, 0, -1, -1, -2, -2]
    assert {s.priority for s in plan_slices([4, 4, 4], 2, use_priority=False)} == {0}


@pytest.mark.parametrize("num_servers", [1, 2, 3, 4, 7, 8])
def test_consecutive_keys_spread_evenly_over_the_servers(num_servers):
    counts = [0] * num_servers
    for key_number in range(len(plan_slices([1_000_000, 333, 250_001], DEFAULT_SLICE_SIZE))):
        counts[server_of(key_number, num_servers)] += 1
    assert max(counts) - min(counts) <= 1


def test_more_servers_than_slices_puts_each_slice_on_its_own_server():
    slices = plan_slices([3, 2], 5)
    assert len({server_of(n, 8) for n in range(len(slices))}) == len(slices) == 2


@pytest.mark.parametrize("bad", [-1, 1.5, "50", True])
def test_bad_slice_sizes_are_refused(bad):
    with pytest.raises(ValueError, match="P3_SLICE_SIZE must be a whole number >= 0"):
        plan_slices([10], bad)
