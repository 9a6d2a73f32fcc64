"""The bandwidths of a sweep on a shaped testbed, chosen from a measured baseline probe.

Before the sweep, one baseline run per model on the unshaped links (the probe,
with the sweep's own settings) measures, from its unified result,
``compute_s_per_iter`` (t_c: forward and backward, waits excluded) and
``comm_s_per_iter`` (t_0: communication when the links add nothing but their
fixed costs: serialisation, the servers, the CPU the roles share). The bytes per
iteration come from the model's trainable parameters (the study entry's
``parameters``, counted per image shape): each worker pushes its gradients and
pulls the weights back, 2 x 4 bytes x parameters. With one worker and one server
per host, the share (N - 1) / N of both crosses a host's egress, which is what
tc limits. So at bandwidth B the baseline's ratio is predicted as

    r(B) = (t_0 + 8 x wire_bytes / B) / t_c

and each target ratio r of the matrix gives B = 8 x wire_bytes / (r x t_c - t_0),
rounded to 2 significant digits. A target the unshaped links already exceed
(r x t_c <= t_0), or one that needs more than the links carry (the target's
link capacity, else MAX_SHAPED), is served by one run at native bandwidth.
The prediction only places the bandwidths: plots and verdicts use the ratio
each configuration's baseline runs measured.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from reprokit.core.errors import UserError
from reprokit.study.paper.rates import NATIVE, shaped_bps
from reprokit.study.store.sweep_plan import BandwidthChoice

BYTES_PER_PARAMETER = 4  # float32 gradients and weights
MAX_SHAPED = "10gbit"  # above this, a tc limit does not bind on a namespace testbed of a few cores


def rate_name(bits_per_s: float) -> str:
    """A tc rate at 2 significant digits: 5800mbit, 720mbit, 1.5mbit, 800kbit."""
    for unit, factor in (("mbit", 1e6), ("kbit", 1e3)):
        if bits_per_s >= factor:
            return f"{float(f'{bits_per_s / factor:.2g}'):g}{unit}"
    return "1kbit"


def _measured(result: Mapping[str, object], key: str, model: str) -> float:
    value = result.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise UserError(f"the baseline probe of {model} measured no {key} (its workers' p3-comm line is missing "
                        f"or empty); give the bandwidths yourself: --bandwidths=RATE,RATE,...")
    return float(value)


def choose(model: str, result: Mapping[str, object], probe_run: str, parameters: Mapping[str, Mapping[str, int]],
           parameters_source: str, hosts: int, ratios: Sequence[float], link_capacity: str | None,
           probe_seconds: float | None = None) -> BandwidthChoice:
    """The bandwidths for ``model`` from its probe's unified result (see the module's docstring)."""
    t_c = _measured(result, "compute_s_per_iter", model)
    t_0 = _measured(result, "comm_s_per_iter", model)
    shape = str(result.get("image_shape") or "")
    count = parameters.get(model, {}).get(shape)
    if count is None:
        raise UserError(f"the study entry has no parameter count of {model} at image shape {shape or '(none)'}; "
                        f"add it under parameters.{model} in its meta, or give --bandwidths=RATE,RATE,...")
    bytes_per_iter = 2 * BYTES_PER_PARAMETER * count
    wire = bytes_per_iter * (hosts - 1) / hosts
    cap = shaped_bps(link_capacity) if link_capacity else shaped_bps(MAX_SHAPED)
    chosen: dict[str, float] = {}
    notes = []
    for target in sorted(ratios):
        need = target * t_c - t_0
        bps = 8 * wire / need if need > 0 and wire > 0 else math.inf
        if bps > cap:
            why = (f"the unshaped links already give {t_0 / t_c:.2f}" if need <= 0 or wire <= 0
                   else f"it needs {rate_name(bps)}, above {link_capacity or MAX_SHAPED}")
            notes.append(f"target {target:g}: {why}; served by native bandwidth")
            chosen.setdefault(NATIVE, t_0 / t_c)
            continue
        name = rate_name(bps)
        if name in chosen:
            notes.append(f"target {target:g} rounds to {name} as well")
            continue
        chosen[name] = (t_0 + 8 * wire / shaped_bps(name)) / t_c
    order = sorted(chosen, key=lambda b: chosen[b])
    return BandwidthChoice(model=model, probe_run=probe_run, image_shape=shape, compute_s_per_iter=t_c,
                           comm_s_per_iter=t_0, parameters=int(count), parameters_source=parameters_source,
                           hosts=hosts, bytes_per_iter=bytes_per_iter, wire_bytes_per_iter=wire,
                           ratios=tuple(sorted(float(r) for r in ratios)), bandwidths=tuple(order),
                           predicted=tuple(chosen[b] for b in order), notes=tuple(notes), probe_seconds=probe_seconds)
