"""When to compact (seeds/000, 001, 002, 003), as shares of the model's window.

- ``compact`` at 75%: compaction after a reply;
- ``emergency`` at 80%: compaction forced before compiling the next call;
- ``flush`` at 85% when auto-compaction is off: save facts to memory and ask the model
  to write memory tags, so that pruning can follow safely;
- ``sleep`` at 50% once the session has been idle for ``idle_seconds``;
- ``truncate`` at the hard limit (the whole window): only then does the compiler drop the
  oldest messages outright.

The preserve window keeps the last ``preserve_messages`` messages or
``preserve_share`` of the window, whichever is larger (seeds/003: 20 messages or 20%).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from loci.errors import ConfigError
from loci.settings import Settings


class Decision(StrEnum):
    NONE = "none"
    SLEEP = "sleep"
    COMPACT = "compact"
    EMERGENCY = "emergency"
    FLUSH = "flush"
    TRUNCATE = "truncate"


#: The decisions on which ``CompactionService.maybe_compact`` compacts.
COMPACTING = frozenset({Decision.SLEEP, Decision.COMPACT, Decision.EMERGENCY})


@dataclass(frozen=True)
class CompactionPolicy:
    """The thresholds of compaction; the defaults are the settings' own."""

    auto: bool = Settings.compaction_auto
    compact_at: float = Settings.compaction_threshold
    emergency_at: float = Settings.compaction_emergency
    flush_at: float = Settings.compaction_flush
    sleep_at: float = Settings.compaction_sleep
    hard_limit: float = 1.0
    idle_seconds: float = Settings.compaction_idle_seconds
    preserve_messages: int = Settings.compaction_preserve_messages
    preserve_share: float = Settings.compaction_preserve_share
    #: Tool outputs longer than this keep their head and a truncation note.
    mask_chars: int = 2_000
    #: Tool outputs longer than this also become a readable artifact document.
    artifact_chars: int = 5_000

    def __post_init__(self) -> None:
        shares = (self.compact_at, self.emergency_at, self.flush_at, self.sleep_at,
                  self.preserve_share)
        if not all(0 < s <= 1 for s in shares) or not 0 < self.hard_limit <= 1:
            raise ConfigError("compaction thresholds must be fractions of the window in (0, 1]")
        if not self.sleep_at <= self.compact_at <= self.emergency_at <= self.hard_limit:
            raise ConfigError("compaction thresholds must rise: sleep <= threshold <= "
                              f"emergency <= 1 (got {self.sleep_at}, {self.compact_at}, "
                              f"{self.emergency_at})")
        if self.preserve_messages < 0 or self.mask_chars < 100:
            raise ConfigError("preserve_messages must be >= 0 and mask_chars >= 100")

    def decide(
        self, tokens: int, window: int, *, idle_seconds: float = 0.0, before_compile: bool = False
    ) -> Decision:
        """What to do for a session holding ``tokens`` of live history."""
        share = tokens / window if window else 0.0
        if share >= self.hard_limit:
            return Decision.TRUNCATE if not self.auto else Decision.EMERGENCY
        if not self.auto:
            return Decision.FLUSH if share >= self.flush_at else Decision.NONE
        if before_compile:
            return Decision.EMERGENCY if share >= self.emergency_at else Decision.NONE
        if share >= self.compact_at:
            return Decision.COMPACT
        if share >= self.sleep_at and idle_seconds >= self.idle_seconds:
            return Decision.SLEEP
        return Decision.NONE

    def preserve_tokens(self, window: int) -> int:
        return int(window * self.preserve_share)
