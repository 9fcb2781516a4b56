"""Facts: types and expiry (and, as the memory issue lands, tags, dedup and the mirror)."""

from loci.memory.types import DEFAULT_TTL_DAYS, expiry_for, new_memory_id

__all__ = ["DEFAULT_TTL_DAYS", "expiry_for", "new_memory_id"]
