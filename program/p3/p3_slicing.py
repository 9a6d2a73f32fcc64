"""How P3 cuts parameters into kvstore keys: slices, their priorities and their servers.

Pure Python (no MXNet), so the engine's train.py and the framework's tests share it.

P3 (Jayarajan et al., SysML'19) cuts every parameter into slices of at most
``slice_size`` elements (the paper: 50,000), sends each slice as its own key,
and gives slices of layers nearer the input a higher priority, because the
next iteration's forward pass needs them first.
"""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SLICE_SIZE = 50_000
# Stock MXNet's dist kvstore puts a key smaller than MXNET_KVSTORE_BIGARRAY_BOUND on server
# (key * 9973) % num_servers (kvstore_dist.h); string keys become 0, 1, 2, ... in order of init.
MXNET_KEY_HASH = 9973


@dataclass(frozen=True)
class Slice:
    key: str  # the kvstore key
    param: int  # index of the parameter in forward (input-first) order
    start: int  # first element of the flattened parameter
    stop: int  # one past the last
    priority: int  # MXNet runs higher priorities first: 0 for the input layer, -i for parameter i

    @property
    def size(self) -> int:
        return self.stop - self.start


def plan_slices(sizes: list[int], slice_size: int = DEFAULT_SLICE_SIZE, use_priority: bool = True) -> list[Slice]:
    """Slices covering every element of every parameter exactly once, in forward order.

    ``slice_size`` 0 keeps each parameter whole (the paper's ablation without slicing);
    ``use_priority`` False gives every slice priority 0.
    """
    if isinstance(slice_size, bool) or not isinstance(slice_size, int) or slice_size < 0:
        raise ValueError(f"P3_SLICE_SIZE must be a whole number >= 0, got {slice_size!r}")
    slices = []
    for index, size in enumerate(sizes):
        if size < 1:
            raise ValueError(f"parameter {index} has {size} elements")
        step = size if slice_size == 0 else slice_size
        for number, start in enumerate(range(0, size, step)):
            slices.append(Slice(key=f"p3_{index}_{number}", param=index, start=start,
                                stop=min(size, start + step), priority=-index if use_priority else 0))
    return slices


def server_of(key_number: int, num_servers: int) -> int:
    """The server stock MXNet assigns the ``key_number``-th key initialised (for keys below the big-array bound).

    9973 is prime, so consecutive keys visit every server before any server repeats.
    """
    return (key_number * MXNET_KEY_HASH) % num_servers
