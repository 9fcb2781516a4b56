"""The one seam by which embedding and chat providers are chosen from settings.

A registry maps provider names (and aliases) to factories; :func:`provider_options`
resolves a name and checks the keyword options against the factory's signature, so a
typo in loci.toml is a clear ``ConfigError`` rather than a ``TypeError``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from loci.errors import ConfigError

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")


def provider_options(
    what: str, registry: Mapping[str, Callable[..., T]], provider: str, default: str,
    options: Mapping[str, Any], ignored: frozenset[str] = frozenset(),
) -> tuple[str, Callable[..., T], dict[str, Any]]:
    """(normalised name, factory, accepted options) for ``provider``.

    Options that are ``None`` or ``""`` are dropped, so unset settings fall back to the
    provider's defaults; ``ignored`` options are dropped too (offline providers ignore
    connection settings). Unknown providers or options raise ``ConfigError``.
    """
    key = (provider or default).strip().lower()
    factory = registry.get(key)
    if factory is None:
        known = ", ".join(sorted(registry))
        raise ConfigError(f"unknown {what} provider {provider!r}; known providers: {known}")
    given = {name: value for name, value in options.items()
             if value is not None and value != "" and name not in ignored}
    accepted = [
        p.name
        for p in inspect.signature(factory).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    unknown = sorted(set(given) - set(accepted))
    if unknown:
        raise ConfigError(
            f"{what} provider {key!r} does not take option(s) {', '.join(unknown)}; "
            f"it takes: {', '.join(accepted)}"
        )
    return key, factory, given


def error_detail(response: httpx.Response) -> str:
    """An HTTP provider's own error message if it sent one, else its body, whole: the
    caller redacts credentials from it before cutting it to length."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip() or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and "message" in error:
            return str(error["message"])
        return str(error)
    return str(body)
