"""Compaction that loses nothing: policy, observation masking, memory flush, summaries
and archives."""

from loci.compaction.compactor import CompactionResult, Compactor
from loci.compaction.policy import Decision, decide

__all__ = ["CompactionResult", "Compactor", "Decision", "decide"]
