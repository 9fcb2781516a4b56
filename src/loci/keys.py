"""API keys for the server: create, check and revoke.

A key looks like ``loci_<id>_<secret>``. Only the SHA-256 of the whole key is stored,
so a leaked database does not leak keys; the id part lets ``loci keys revoke`` name a
key without knowing its secret. Each key is bound to one tenant (a Loci user), and
the server derives every request's scope from the key, never from the request; an
operator key (bound to ``OPERATOR``, which no user name can be) acts for the user a
request names, as every request does on a server without keys.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

from loci.checks import OPERATOR
from loci.errors import NotFoundError
from loci.models import ApiKey
from loci.store import Store

PREFIX = "loci_"
__all__ = ["OPERATOR", "PREFIX", "check_key", "create_key", "hash_key", "revoke_key"]


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def create_key(store: Store, tenant: str, now: datetime, label: str = "") -> tuple[ApiKey, str]:
    """A new key for ``tenant``; returns its record and the key itself (shown once)."""
    key_id = secrets.token_hex(4)
    key = f"{PREFIX}{key_id}_{secrets.token_urlsafe(24)}"
    record = ApiKey(key_id, tenant, label, now)
    store.add_api_key(record, hash_key(key))
    return record, key


def check_key(store: Store, key: str) -> ApiKey | None:
    """The active key record for ``key``, or None (unknown, malformed or revoked)."""
    if not key.startswith(PREFIX) or len(key) > 200:
        return None
    return store.find_api_key(hash_key(key))


def revoke_key(store: Store, key_id: str) -> str:
    """Revoke the key ``key_id`` (its id, or the whole key: its id is read from it);
    returns its id."""
    if key_id.startswith(PREFIX) and key_id.count("_") >= 2:
        key_id = key_id.split("_", 2)[1]
    if not store.revoke_api_key(key_id):
        raise NotFoundError(f"no active API key {key_id!r} (see `loci keys list`)")
    return key_id
