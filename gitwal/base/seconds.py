"""A number of seconds a person or a caller gave (``--timeout``,
``--wait-timeout``, ``wal.commandTimeout``, ``wal.waitTimeout``, a claim's
``--ttl``): checked once, here, before anything is logged. NaN, infinity,
a negative number or more than :data:`MAX_SECONDS` is refused: they reach
``math.ceil``, ``time.localtime`` and the kernel's timers, which fail on them
after a step's intent is durable."""

from __future__ import annotations

import math

from .errors import ToolRefused

__all__ = ["MAX_SECONDS", "seconds"]

MAX_SECONDS = 366 * 24 * 3600  # a year: longer than any wait or command a step means


def seconds(raw: object, what: str, hint: str, zero: bool = False) -> float:
    """``raw`` as seconds: finite, positive (``zero``: or 0), at most a year;
    else :class:`ToolRefused` naming ``what`` (if any), with ``hint``."""
    try:
        value = float(raw) if isinstance(raw, (int, float, str)) and not isinstance(
            raw, bool) else math.nan
    except (ValueError, OverflowError):
        value = math.nan
    if math.isfinite(value) and (value >= 0 if zero else value > 0) and value <= MAX_SECONDS:
        return value
    kind = "a number of seconds" if zero else "a positive number of seconds"
    bound = f" up to {MAX_SECONDS} (a year)" if not math.isnan(value) else ""
    said = f"{what} is {raw!r}, not" if what else f"{raw!r} is not"
    raise ToolRefused(f"{said} {kind}{bound}", hint)
