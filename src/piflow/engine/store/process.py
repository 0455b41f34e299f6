"""Is the process holding a run lease still the one that took it? (DESIGN 6, spec G.1 `owner.json`)

A lease records the holder's pid and, on Linux, the process start time from `/proc`. A pid
that answers signal 0 is alive unless its start time differs from the recorded one (the pid
was reused by an unrelated process) or it is a zombie (killed, not yet reaped).
"""

from __future__ import annotations

import os
from functools import cache

_HAS_PROC = os.path.exists("/proc/self/stat")


@cache
def host_name() -> str:
    """This machine's name: pids are only meaningful on the host that recorded them."""
    import socket  # ~2 ms: `piflow runs` of runs without a lease never asks

    return socket.gethostname()


def _proc_stat(pid: int) -> list[str] | None:
    """Fields 3.. of `/proc/<pid>/stat` (after the parenthesised command, which may hold spaces)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def process_start(pid: int) -> int | None:
    """The start time of `pid` in clock ticks since boot, or None where `/proc` cannot tell."""
    stat = _proc_stat(pid)
    if stat is None or len(stat) < 20:
        return None
    return int(stat[19])  # field 22, `starttime`


def process_alive(pid: int, start: int | None) -> bool:
    """True when `pid` runs and, if `start` is known, is the same process that recorded it."""
    if pid <= 0:
        return False
    if os.name == "nt":
        # Signal 0 is CTRL_C_EVENT on Windows: never send it. Heartbeats decide there.
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    if not _HAS_PROC:
        return True  # macOS, BSD: signal 0 is all we have
    stat = _proc_stat(pid)
    if stat is None:
        return False  # exited since the signal
    if stat[0] in ("Z", "X"):
        return False
    return start is None or len(stat) < 20 or int(stat[19]) == start
