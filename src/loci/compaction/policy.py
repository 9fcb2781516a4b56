"""When to compact, as shares of the model's window; the
thresholds are ``[compaction]`` settings (``settings.CompactionSettings``).

- ``compact`` at 75%: compaction after a reply;
- ``emergency`` at 80%: compaction forced before compiling the next call;
- ``flush`` at 85% when auto-compaction is off: save facts to memory and ask the model
  to write memory tags, so that pruning can follow safely;
- ``sleep`` at 35% once the session has been idle for ``idle_seconds``;
- ``truncate`` at the hard limit (the whole window): only then does the compiler drop the
  oldest messages outright.

The preserve window keeps the last ``preserve_messages`` messages or
``preserve_share`` of the window, whichever is larger (20 messages or 20%).
"""

from __future__ import annotations

from enum import StrEnum

from loci.settings import CompactionSettings


class Decision(StrEnum):
    NONE = "none"
    SLEEP = "sleep"
    COMPACT = "compact"
    EMERGENCY = "emergency"
    FLUSH = "flush"
    TRUNCATE = "truncate"


#: The decisions on which ``CompactionService.maybe_compact`` compacts.
COMPACTING = frozenset({Decision.SLEEP, Decision.COMPACT, Decision.EMERGENCY})


#: The whole window: only at this share does the compiler drop the oldest messages.
HARD_LIMIT = 1.0


def decide(
    policy: CompactionSettings, tokens: int, window: int, *, idle_seconds: float = 0.0,
    before_compile: bool = False,
) -> Decision:
    """What to do for a session holding ``tokens`` of live history."""
    share = tokens / window if window else 0.0
    if share >= HARD_LIMIT:
        return Decision.TRUNCATE if not policy.auto else Decision.EMERGENCY
    if not policy.auto:
        return Decision.FLUSH if share >= policy.flush else Decision.NONE
    if before_compile:
        return Decision.EMERGENCY if share >= policy.emergency else Decision.NONE
    if share >= policy.threshold:
        return Decision.COMPACT
    if share >= policy.sleep and idle_seconds >= policy.idle_seconds:
        return Decision.SLEEP
    return Decision.NONE


def preserve_tokens(policy: CompactionSettings, window: int) -> int:
    return int(window * policy.preserve_share)
