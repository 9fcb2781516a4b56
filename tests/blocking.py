"""``AsyncLoci`` driven as a ``Loci``, so that one behaviour suite tests both APIs:
every coroutine runs to its end (``asyncio.run``); the views' plain
attributes (``settings``, ``store``, ``knowledge``, ...) come from the ``Loci`` under it.
A public ``Loci`` method that ``AsyncLoci`` lacks is an AttributeError, so the suite
fails when the surfaces part."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from loci import AsyncLoci, Loci


class Blocking:
    def __init__(self, aloci: AsyncLoci) -> None:
        self._aloci = aloci

    def __getattr__(self, name: str) -> Any:
        own = inspect.getattr_static(AsyncLoci, name, None)
        if inspect.iscoroutinefunction(own):
            method = getattr(self._aloci, name)
            return lambda *args, **kwargs: asyncio.run(method(*args, **kwargs))
        if name == "for_scope":
            return lambda *args, **kwargs: Blocking(self._aloci.for_scope(*args, **kwargs))
        if own is None and inspect.isfunction(inspect.getattr_static(Loci, name, None)):
            raise AttributeError(f"AsyncLoci has no method {name!r}")
        return getattr(self._aloci.loci, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:  # e.g. a test's clock, set on the view
            setattr(self._aloci.loci, name, value)
