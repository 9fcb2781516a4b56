"""Reading provider payloads as they come: the text of a message's content, the token
counts of a usage object. Shared by the chat clients and the server's proxy faces.

``JSON`` and ``JSONObject`` type what crosses the wire with a shape Loci does not rely
on (a tool's schema or arguments, a block passed back as it came, a provider's extra
fields), its fields read by narrowing; a body Loci builds or reads field by field has
its API's typed shape (``apis.shapes``) wherever the modules that read it take one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeGuard

from loci.errors import ValidationError
from loci.models import Usage

if TYPE_CHECKING:  # read-only containers: a list of objects is a JSON value too
    JSON: TypeAlias = (bool | int | float | str | Sequence["JSON"]
                       | Mapping[str, "JSON"] | None)
else:  # pydantic takes such a value as it comes, unchecked (as ``Any``), at no cost
    JSON = object
#: A JSON object whose fields are read by narrowing, not trusted to a shape.
JSONObject: TypeAlias = dict[str, JSON]


def message_text(content: Any) -> str:
    """Text of an OpenAI-style ``content``: a string, None or a list of typed parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return str(content)


#: More tokens than one call has: a count past it is none (and sums of such would
#: overflow the store's 64-bit integers).
MAX_CALL_TOKENS = 10**12


def usage_int(usage: Any, *keys: str) -> int:
    """The first token count found under ``keys`` in a usage object, else 0."""
    if isinstance(usage, dict):
        for key in keys:
            value = usage.get(key)
            if is_count(value):
                return value
    return 0


def is_count(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is a token count a call can have."""
    return isinstance(value, int) and not isinstance(value, bool) and (
        0 <= value <= MAX_CALL_TOKENS)


def check_usage(value: Any) -> Any:
    """``value`` (a provider's usage object) if every whole number in it, and in its
    ``*_details``, is a token count a call can have, and so is every value named a
    count (``*tokens``, ``*token_count``; None: not given), else a ``ValidationError``
    (a count of 1.5 or "100" would be recorded as none)."""
    data = as_dict(value)
    for key, item in [*data.items(), *((f"{k}.{d}", v) for k, details in data.items()
                                       if isinstance(details, dict)
                                       for d, v in details.items())]:
        named = key.endswith(("tokens", "token_count")) and item is not None
        if (named or (isinstance(item, int) and not isinstance(item, bool))) and (
                not is_count(item)):
            raise ValidationError(f"usage {key} must be a token count from 0 to "
                                  f"{MAX_CALL_TOKENS:,}, not {item!r}")
    return value


def read_usage(value: Any) -> Usage:
    """A provider's usage object as it comes (a dict, or an SDK object), in one shape:
    OpenAI Chat (``prompt_tokens``, ``prompt_tokens_details.cached_tokens``), OpenAI
    Responses (``input_tokens``, ``input_tokens_details.cached_tokens``), Anthropic
    (``input_tokens`` beside ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens``) or Gemini (``prompt_token_count``,
    ``cached_content_token_count``); a :class:`Usage` is taken as it is."""
    if isinstance(value, Usage):
        return value
    data = as_dict(value)
    if "prompt_token_count" in data:  # Gemini's usage_metadata
        return _usage(usage_int(data, "prompt_token_count"),
                      usage_int(data, "cached_content_token_count"), 0,
                      usage_int(data, "candidates_token_count"))
    if "prompt_tokens" in data:
        details = as_dict(data.get("prompt_tokens_details"))
        return _usage(usage_int(data, "prompt_tokens"), usage_int(details, "cached_tokens"),
                      0, usage_int(data, "completion_tokens"))
    read = usage_int(data, "cache_read_input_tokens")
    written = usage_int(data, "cache_creation_input_tokens")
    # Anthropic counts its cache apart from input_tokens; OpenAI's Responses within it.
    cached = read or usage_int(as_dict(data.get("input_tokens_details")), "cached_tokens")
    return _usage(usage_int(data, "input_tokens") + read + written, cached, written,
                  usage_int(data, "output_tokens"))


def _usage(given: int, cached: int, written: int, output: int) -> Usage:
    """The counts in one shape; the cached and cache-written tokens are input tokens,
    never more than them (a client's or upstream's error would make a hit rate of
    200,000)."""
    cached = min(cached, given)
    return Usage(given, cached, min(written, given - cached), output)


def as_dict(value: Any) -> JSONObject:
    """A provider object as a dict: a dict as it is, an SDK object dumped."""
    if isinstance(value, dict):
        return value
    dump = getattr(value, "model_dump", None)  # the providers' SDK objects (pydantic)
    if callable(dump):
        dumped = dump()
        return dumped if isinstance(dumped, dict) else {}
    return dict(vars(value)) if hasattr(value, "__dict__") else {}


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one (for reading optional fields)."""
    return value if isinstance(value, Mapping) else {}
