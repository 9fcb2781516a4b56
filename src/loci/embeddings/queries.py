"""Query vectors, remembered per text.

Recall embeds the incoming message on every compile, and the same text is often
embedded again (a retried compile, the message then searched explicitly, the same
question asked twice); with the bundled model each costs 10-20 ms on two cores.
``QueryVectors`` keeps the vectors of the last ``size`` texts. (Embedding the message
in a worker thread while the other layers are built was tried: on two busy cores it
gained nothing measurable, 40.2 vs 39.1 ms compile p50 over three alternating runs.)
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from loci.embeddings.base import Embedder, Vectors

#: Texts whose vectors are kept.
QUERY_CACHE = 256


class QueryVectors:
    def __init__(self, embedder: Embedder, size: int = QUERY_CACHE) -> None:
        self.embedder = embedder
        self.size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, Vectors] = OrderedDict()

    def get(self, text: str) -> Vectors:
        """The vector of ``text``: remembered, or computed now (a provider error is
        raised and nothing is remembered)."""
        with self._lock:
            known = self._entries.get(text)
            if known is not None:
                self._entries.move_to_end(text)
                return known
        vector: Vectors = self.embedder.embed([text])[0]
        vector.flags.writeable = False  # shared by every caller of this text
        with self._lock:
            self._entries[text] = vector
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return vector
