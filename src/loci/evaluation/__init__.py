"""Evaluating a context engine on an agent's own sessions: what the compiled context
holds of the agent's trail at points of a session, against the recency tail at the
same tokens (``replay``), for ``loci eval`` and ``benchmarks/agent_sessions.py``."""

from loci.evaluation.replay import CUTS, evaluate, replay, report_lines

__all__ = ["CUTS", "evaluate", "replay", "report_lines"]
