"""Embeddings from any server that speaks the OpenAI ``/embeddings`` API.

The API shape is separate from the host: the same class talks to OpenAI
(``https://api.openai.com/v1``), Ollama (``http://localhost:11434/v1``), vLLM, LM Studio
or llama.cpp's server. It POSTs ``{"model": ..., "input": [...]}`` to
``{base_url}/embeddings`` in batches and L2-normalises the answers. Every failure
(unreachable server, HTTP error, malformed or incomplete answer) becomes a
:class:`~loci.errors.ProviderError` whose message says what to check.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

import httpx
import numpy as np

from loci.embeddings.base import Vectors, batched, check_texts, empty_vectors, l2_normalize
from loci.errors import ConfigError, ProviderError
from loci.providers import error_detail

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_STATUS_HINTS = {
    401: "check the API key (embedding.api_key / LOCI_EMBEDDING_API_KEY)",
    403: "check the API key and that it may use this model",
    404: "check embedding.base_url (it usually ends in /v1) and embedding.model",
    429: "the server is rate-limiting: retry later or lower the batch size",
}


class OpenAICompatibleEmbedder:
    """An embedding model behind an OpenAI-compatible HTTP API."""

    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        dim: int | None = None,
        batch_size: int = 128,
        timeout: float = 30.0,
    ) -> None:
        if not model:
            raise ConfigError("the OpenAI-compatible embedder needs a model name")
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"embedding base_url must start with http:// or https://: {base_url!r}"
            )
        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, got {batch_size}")
        if dim is not None and dim < 1:
            raise ConfigError(f"dim must be positive, got {dim}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/embeddings"
        self.name = f"openai:{model}"
        self.batch_size = batch_size
        self.timeout = timeout
        self._dim = dim
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._api_key = api_key
        self._client = httpx.Client(timeout=timeout, headers=headers)

    @property
    def dim(self) -> int:
        """Vector dimension; asks the server once if it was not given."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Unit vectors of shape ``(len(texts), dim)``, in the order of ``texts``."""
        items = check_texts(texts)
        if not items:
            return empty_vectors(self.dim)
        # Some servers (OpenAI among them) reject empty strings.
        items = [text if text.strip() else " " for text in items]
        chunks = [
            self._embed_batch([items[i] for i in chunk])
            for chunk in batched(range(len(items)), self.batch_size)
        ]
        return np.concatenate(chunks, axis=0)

    def _embed_batch(self, batch: list[str]) -> Vectors:
        payload = self._post({"model": self.model, "input": batch})
        rows = _parse_rows(payload, len(batch), self.url)
        width = rows.shape[1]
        if self._dim is None:
            self._dim = width
        elif width != self._dim:
            raise ProviderError(
                f"{self.url} returned {width}-dimensional embeddings for model "
                f"{self.model!r}, expected {self._dim}: check embedding.model and dim"
            )
        return l2_normalize(rows)

    def _post(self, body: dict[str, Any]) -> Any:
        where = f"the embedding server at {self.url}"
        try:
            response = self._client.post(self.url, json=body)
        except httpx.TimeoutException as exc:
            raise ProviderError(
                f"{where} did not answer within {self.timeout:g}s: check that it is up, "
                "or raise the timeout"
            ) from exc
        except httpx.HTTPError as exc:
            raise ProviderError(
                f"cannot reach {where} ({exc.__class__.__name__}: {exc}): check "
                "embedding.base_url and that the server is running"
            ) from exc
        if response.status_code >= 400:
            hint = _STATUS_HINTS.get(response.status_code)
            if hint is None:
                hint = (
                    "the server failed; check its logs"
                    if response.status_code >= 500
                    else "check embedding.model and the request"
                )
            detail = error_detail(response)
            if self._api_key:  # an echo of the key, redacted before the text is cut
                detail = detail.replace(self._api_key, "***")
            raise ProviderError(
                f"{where} answered HTTP {response.status_code}: {detail[:200]}; {hint}"
            )
        try:
            return response.json()
        except ValueError as exc:
            raise ProviderError(
                f"{where} did not answer JSON ({response.text[:80]!r}): is embedding.base_url "
                "an OpenAI-compatible API (usually ending in /v1)?"
            ) from exc

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def __enter__(self) -> OpenAICompatibleEmbedder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OpenAICompatibleEmbedder(model={self.model!r}, base_url={self.base_url!r})"


def _parse_rows(payload: Any, expected: int, url: str) -> Vectors:
    """The embedding rows of an answer, in input order, checked for shape."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise ProviderError(
            f"{url} answered without a 'data' list: is it an OpenAI-compatible embeddings API?"
        )
    if len(data) != expected:
        raise ProviderError(
            f"{url} returned {len(data)} embeddings for {expected} inputs: "
            "the server may truncate batches; lower batch_size"
        )
    if all(isinstance(item, dict) and isinstance(item.get("index"), int) for item in data):
        data = sorted(data, key=lambda item: item["index"])
    vectors = [item.get("embedding") if isinstance(item, dict) else None for item in data]
    if not all(isinstance(v, list) and v for v in vectors):
        raise ProviderError(
            f"{url} returned an item without a list of numbers under 'embedding' "
            "(base64 encoding is not supported)"
        )
    try:
        array = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ProviderError(
            f"{url} returned embeddings that are not equal-length lists of numbers"
        ) from exc
    if array.ndim != 2 or not np.isfinite(array).all():
        raise ProviderError(f"{url} returned embeddings with non-finite or nested values")
    return array
