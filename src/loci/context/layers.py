"""The layers of compiled context, their sections, budgets and drop priorities.

Sections, in the order they reach the model (stable first, so the prompt cache holds):

- ``static``: principles, identity, AGENTS.toml, TOOLS.md and the tools hint. Byte-
  stable for an agent and workspace, so providers can cache it.
- ``dynamic``: the second system message: date and user, USER.md, /profile/ documents,
  BOOT.md, MEMORY.md, the daily log, sticky facts, state, memories by recency, the
  compaction summary. Changes rarely (a new fact, a new day).
- ``history``: whole steps since the last compaction (``context.history``), append-only
  between compactions, within ``history_budget``.
- ``retrieved``: what depends on the current message (recall, matched skills, focus,
  reflexion hints) and on the room left (the trail of compacted spans beyond what the
  summary shows), as a system message right before it, so that it never breaks the
  cache of everything above.

A budget of 1 or more is tokens; below 1 it is a share of the model's window. When a
section is over budget, layers of lower ``priority`` lose their items first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from loci.errors import ConfigError

SECTIONS = ("static", "dynamic", "history", "retrieved")


@dataclass(frozen=True)
class LayerSpec:
    name: str
    section: str
    budget: float
    priority: int


DEFAULT_LAYERS: tuple[LayerSpec, ...] = (
    LayerSpec("principles", "static", 1_000, 100),
    LayerSpec("identity", "static", 3_000, 99),
    LayerSpec("agents", "static", 2_000, 60),
    LayerSpec("tools", "static", 2_000, 70),
    LayerSpec("date_user", "dynamic", 100, 100),
    LayerSpec("user_file", "dynamic", 800, 80),
    LayerSpec("profile", "dynamic", 1_500, 85),
    LayerSpec("boot", "dynamic", 500, 75),
    LayerSpec("memory_file", "dynamic", 1_000, 78),
    LayerSpec("daily_log", "dynamic", 800, 50),
    LayerSpec("sticky", "dynamic", 1_000, 95),
    LayerSpec("state", "dynamic", 400, 70),
    LayerSpec("memories", "dynamic", 1_500, 40),
    LayerSpec("compaction_summary", "dynamic", 0.25, 90),  # within half the history
    LayerSpec("history", "history", 0.6, 90),
    LayerSpec("flush", "retrieved", 300, 90),
    LayerSpec("focus", "retrieved", 800, 80),
    LayerSpec("reflexion", "retrieved", 400, 75),
    LayerSpec("skills", "retrieved", 2_000, 65),
    LayerSpec("recall", "retrieved", 2_000, 60),
    LayerSpec("earlier_trail", "retrieved", 2_000, 55),
)
#: static ~8K, dynamic ~5K, retrieved ~5K. History gets 60% of the window
#: rather than a fixed ~10K: history is trimmed by compaction (which summarizes)
#: instead of by silently dropping turns, and a history that moves only at compactions
#: keeps the prompt prefix cacheable (see benchmarks/cache_stability.py).
SECTION_BUDGETS: dict[str, float] = {
    "static": 8_000, "dynamic": 5_000, "history": 0.6, "retrieved": 5_000,
}


#: When the other sections want more than this share of the compiled budget (small
#: windows), this is what they get and history the rest (they rarely use more).
SECTIONS_SHARE = 0.2
#: A compaction summary is the older part of history: it is written within this share
#: of the history budget and counted in it (the compaction policy counts it too).
SUMMARY_SHARE = 0.25
#: A compaction preserves at most this share of the history budget verbatim, so that
#: with the summary at most half is taken and the next compaction (a prompt-cache
#: break) comes only after another half of new conversation.
PRESERVE_SHARE = 0.25


def tokens_for(budget: float, window: int) -> int:
    return int(budget * window) if budget < 1 else int(budget)


def history_budget(window: int, budget: int, sections: Mapping[str, float]) -> int:
    """The history section's budget: its own share of the window, within what the
    compiled ``budget`` leaves after the other sections' reserve. The compiler and the
    compaction policy both use this one figure, so a history over it is compacted
    (summarized), never cut by the compiler first."""
    others = sum(tokens_for(sections[s], window) for s in SECTIONS if s != "history")
    reserve = min(others, int(SECTIONS_SHARE * budget))
    return max(min(tokens_for(sections["history"], window), budget - reserve), 0)


def configure(
    order: Sequence[str], budgets: Mapping[str, float]
) -> tuple[list[LayerSpec], dict[str, float]]:
    """Layers in the configured order (an empty order keeps the default; a layer left
    out is disabled) with per-layer and per-section budget overrides."""
    known = {layer.name: layer for layer in DEFAULT_LAYERS}
    names = list(order) or list(known)
    unknown = [n for n in [*names, *budgets] if n not in known and n not in SECTIONS]
    if unknown:
        raise ConfigError(
            f"unknown context layer(s): {', '.join(unknown)}; known: {', '.join(known)}"
        )
    if "history" not in names:
        names.append("history")
    for name, value in budgets.items():
        if value < 0:
            raise ConfigError(f"the budget of {name} must not be negative")
    layers = [replace(known[n], budget=budgets.get(n, known[n].budget)) for n in names]
    sections = {s: budgets.get(s, SECTION_BUDGETS[s]) for s in SECTIONS}
    return layers, sections
