"""The one exception tree of Loci.

Every error that Loci raises on purpose is a ``LociError``; callers catch that one
class, and the CLI and server turn it into a one-line message (exit code 2, HTTP 4xx)::

    LociError
    ├── ConfigError          bad settings, loci.toml or LOCI_* variables
    ├── ValidationError      bad input: unknown role, malformed JSONL, bad path
    │   └── BudgetExceededError   the current message cannot fit the token budget
    ├── NotFoundError        no such session, memory, document or state key
    ├── ConflictError        the same thing changed in two places (markdown sync)
    ├── AuthError            the server got no API key, or an unknown or revoked one
    │   └── ForbiddenError   a valid key that may not do this
    ├── StoreError           the storage backend failed or is incompatible
    │   └── EmbeddingMismatchError  the store was indexed with another model
    └── ProviderError        an embedding or chat provider failed
"""

from __future__ import annotations


class LociError(Exception):
    """Root of every error Loci raises on purpose."""

    #: HTTP status the server answers with for this error.
    http_status = 400


class ConfigError(LociError):
    """Settings are invalid: a bad loci.toml key, a bad LOCI_* value, a bad store URL."""


class ValidationError(LociError):
    """Input is invalid; nothing was stored."""

    http_status = 422


class BudgetExceededError(ValidationError):
    """The current message alone does not fit the token budget."""

    http_status = 413


class NotFoundError(LociError):
    """The session, memory, document or key does not exist in this scope."""

    http_status = 404


class ConflictError(LociError):
    """Two versions of the same item disagree and Loci will not pick one silently."""

    http_status = 409


class AuthError(LociError):
    """The server got no API key, or an unknown or revoked one."""

    http_status = 401


class ForbiddenError(AuthError):
    """The API key is valid but does not allow this."""

    http_status = 403


class StoreError(LociError):
    """The storage backend failed or holds data this version cannot use."""

    http_status = 500


class EmbeddingMismatchError(StoreError):
    """The store was indexed with another embedding model; run ``loci reindex``."""

    http_status = 409


class ProviderError(LociError):
    """An embedding or chat provider failed (network, HTTP error, bad answer)."""

    http_status = 502
