"""Compaction that loses nothing: policy, observation masking, memory flush, summaries
and archives (seeds/001, 003, 004)."""

from loci.compaction.compactor import CompactionResult, Compactor
from loci.compaction.policy import CompactionPolicy, Decision

__all__ = ["CompactionPolicy", "CompactionResult", "Compactor", "Decision"]
