"""Percentages and integer weights: largest-remainder apportioning, shares, rebalancing, targets."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gputui.ops.traffic.vocabulary import DEFAULT_SCALE, HTTPROUTE_MAX_WEIGHT, Step, Targets, fmt_pct


def apportion(pcts: Mapping[str, float], scale: int) -> dict[str, int]:
    """Integer weights proportional to `pcts` that add up to exactly `scale` (largest remainder)."""
    total = sum(pcts.values())
    if total <= 0:
        return {k: 0 for k in pcts}
    exact = {k: scale * p / total for k, p in pcts.items()}
    weights = {k: math.floor(x + 1e-9) for k, x in exact.items()}
    left = scale - sum(weights.values())
    order = sorted(exact, key=lambda k: (-(exact[k] - weights[k]), list(pcts).index(k)))
    for k in order[:max(0, left)]:
        weights[k] += 1
    return weights


def shares(weights: Mapping[str, int | None]) -> dict[str, float]:
    """Each version's share in percent of the known weights (an even split when all are unknown)."""
    known = {k: w for k, w in weights.items() if w is not None}
    if not known:
        return {k: 100.0 / len(weights) for k in weights} if weights else {}
    total = sum(known.values())
    return {k: (100.0 * (weights[k] or 0) / total if total else 0.0) for k in weights}


def rebalance(pcts: Mapping[str, float], version: str, value: float) -> dict[str, float]:
    """Set one version's share; the others share the rest in their current proportions."""
    value = min(100.0, max(0.0, float(value)))
    others = [k for k in pcts if k != version]
    rest = sum(pcts[k] for k in others)
    out = {}
    for k in pcts:
        if k == version:
            out[k] = value
        elif rest > 0:
            out[k] = (100.0 - value) * pcts[k] / rest
        else:
            out[k] = (100.0 - value) / len(others)
    return out


def _parse_pct(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, str):
        value = value.strip().rstrip("%").strip()
    out = float(value)
    if math.isnan(out) or math.isinf(out):
        raise ValueError
    return out


def resolve_targets(current: Mapping[str, float], targets: Targets) -> tuple[dict[str, float], list[str]]:
    """Percentages for every version, summing to 100, or the errors that stop it.

    A step moves one version and rebalances the rest; a mapping that names only
    some versions gives the others the remainder in their current proportions.
    """
    errors: list[str] = []
    names = list(current)
    if isinstance(targets, Step):
        if targets.version not in current:
            return dict(current), [f'no version "{targets.version}" (versions: {", ".join(names)})']
        return rebalance(current, targets.version, current[targets.version] + targets.delta), []
    given: dict[str, float] = {}
    for name, raw in targets.items():
        if name not in current:
            errors.append(f'no version "{name}" (versions: {", ".join(names)})')
            continue
        try:
            pct = _parse_pct(raw)
        except (TypeError, ValueError):
            errors.append(f"{name}: {raw!r} is not a percentage")
            continue
        if not 0 <= pct <= 100:
            errors.append(f"{name}: {fmt_pct(pct)} is outside 0..100%")
            continue
        given[name] = pct
    if errors:
        return dict(current), errors
    if not given:
        return dict(current), ["no target given"]
    total = sum(given.values())
    others = [k for k in names if k not in given]
    if not others:
        if abs(total - 100.0) > 0.01:
            errors.append(f"targets add up to {fmt_pct(total)}, not 100%")
        return {k: given[k] for k in names}, errors
    if total > 100.0 + 0.01:
        return dict(current), [f"targets add up to {fmt_pct(total)}, more than 100%"]
    rest = max(0.0, 100.0 - total)
    base = sum(current[k] for k in others)
    out = {}
    for k in names:
        if k in given:
            out[k] = given[k]
        else:
            out[k] = rest * current[k] / base if base > 0 else rest / len(others)
    return out, []


def route_scale(total: int) -> int:
    """The route's own scale when its weights add up to a multiple of 100, else 100."""
    if total >= DEFAULT_SCALE and total % DEFAULT_SCALE == 0 and total <= HTTPROUTE_MAX_WEIGHT:
        return total
    return DEFAULT_SCALE
