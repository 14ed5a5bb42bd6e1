"""Resetting a consumer group's committed offsets from the console: checked before anything is
sent (an empty group, a known target, an offset within the partitions), then one
OffsetCommit of every partition the group has offsets for (or those of one topic)."""

from __future__ import annotations

from bmq.console.admin import ClusterAdmin, ConsoleError
from bmq.console.messages import parse_number, parse_time

TARGETS = ("earliest", "latest", "time", "offset")


def reset_offsets(admin: ClusterAdmin, group_id: str, to: str, offset_text: str | None,
                  topic: str | None, time_text: str | None = None) -> int:
    """Moves ``group_id``'s committed offsets to the partitions' earliest or latest offsets,
    to the first offset at or after a time, or to one offset; returns how many partitions
    moved. Raises ConsoleError, changing nothing, for a group with members, an unknown target
    or topic, or a malformed offset or time."""
    if to not in TARGETS:
        raise ConsoleError(f"reset to earliest, latest, a time or an offset, not {to!r}")
    wanted = parse_number(offset_text, "offset", -1) if to == "offset" else None
    if wanted == -1:
        raise ConsoleError("type the offset to reset to")
    if to == "time" and not (time_text or "").strip():
        raise ConsoleError("type the time to reset to")
    when = parse_time(time_text or "") if to == "time" else None
    group = admin.group(group_id)
    if not group.is_empty:
        raise ConsoleError(f"group {group_id} is {group.state} with {len(group.members)} "
                           "member(s): stop its consumers before resetting its offsets")
    partitions = [lag for lag in group.lags if topic is None or lag.topic == topic]
    if not partitions:
        where = f" on topic {topic!r}" if topic else ""
        raise ConsoleError(f"group {group_id} has no committed offsets{where}")
    keys = [(lag.topic, lag.partition) for lag in partitions]
    if wanted is not None:
        ends = {(lag.topic, lag.partition): lag.end for lag in partitions}
        beyond = [key for key in keys if ends[key] >= 0 and wanted > ends[key]]
        if beyond:
            t, p = beyond[0]
            raise ConsoleError(f"offset {wanted} is past the end of {t}[{p}] "
                               f"({ends[beyond[0]]})")
        target = dict.fromkeys(keys, wanted)
    elif when is not None:
        # As kafka-consumer-groups --to-datetime: the first offset whose timestamp is at or
        # after the time; a partition with none (every record older) goes to its end.
        at, ends = admin.offsets(keys, (when, "latest"))
        found = {key: at[key] if at.get(key, -1) >= 0 else ends.get(key, -1) for key in keys}
        missing = [key for key in keys if found[key] < 0]
        if missing:
            raise ConsoleError(f"cannot find the offset at {time_text!r} of "
                               f"{missing[0][0]}[{missing[0][1]}]")
        target = found
    else:
        [found] = admin.offsets(keys, (to,))
        missing = [key for key in keys if found.get(key, -1) < 0]
        if missing:
            raise ConsoleError(f"cannot find the {to} offset of {missing[0][0]}"
                               f"[{missing[0][1]}]")
        target = {key: found[key] for key in keys}
    admin.set_group_offsets(group_id, target)
    return len(target)
