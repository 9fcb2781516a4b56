"""What tokens cost: a price table per model (presets here, ``[prices]`` in settings
wins) and the cost of a :class:`~loci.models.Usage` under it. No network: prices are
data the user can correct."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from loci.models import Usage
from loci.tokens import by_model


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float
    #: Input read from the prompt cache.
    cached_input: float
    #: Input written to the prompt cache (OpenAI charges it as plain input).
    cache_write: float

    def cost(self, usage: Usage) -> float:
        return (usage.uncached_tokens * self.input + usage.cached_tokens * self.cached_input
                + usage.cache_write_tokens * self.cache_write
                + usage.output_tokens * self.output) / 1e6

    def uncached_cost(self, input_tokens: int, output_tokens: int) -> float:
        """The cost of the same output after ``input_tokens`` sent without any cache."""
        return (input_tokens * self.input + output_tokens * self.output) / 1e6


def _openai(input: float, cached: float, output: float) -> Price:
    return Price(input, output, cached, input)


def _anthropic(input: float, output: float) -> Price:
    # Anthropic: cache reads at 0.1x the input price, 5-minute cache writes at 1.25x.
    return Price(input, output, round(input * 0.1, 6), round(input * 1.25, 6))


#: Providers' published list prices (standard tier). Globs are allowed; the longest
#: matching pattern wins, and ``[prices]`` in settings wins over all of them.
PRICES: dict[str, Price] = {
    "gpt-5*": _openai(1.25, 0.125, 10.0),
    "gpt-5-mini*": _openai(0.25, 0.025, 2.0),
    "gpt-5-nano*": _openai(0.05, 0.005, 0.4),
    "gpt-4.1*": _openai(2.0, 0.5, 8.0),
    "gpt-4.1-mini*": _openai(0.4, 0.1, 1.6),
    "gpt-4.1-nano*": _openai(0.1, 0.025, 0.4),
    "gpt-4o*": _openai(2.5, 1.25, 10.0),
    "gpt-4o-mini*": _openai(0.15, 0.075, 0.6),
    "claude-sonnet-4*": _anthropic(3.0, 15.0),
    "claude-opus-4-5*": _anthropic(5.0, 25.0),
    "claude-opus-4-1*": _anthropic(15.0, 75.0),
    "claude-haiku-4-5*": _anthropic(1.0, 5.0),
}


def price_of(model: str, extra: Mapping[str, Price] | None = None) -> Price | None:
    """The model's price, settings first, or None if nobody priced it."""
    return by_model(model, extra or {}, PRICES)
