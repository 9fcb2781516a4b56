"""Evaluating a context engine on an agent's own sessions: what the compiled context
holds of the agent's trail at points of a session, against the recency tail at the
same tokens (``replay``), for ``loci eval`` and ``benchmarks/agent_sessions.py``."""

from loci.evaluation.inputs import MIN_WINDOW, checked, numbers
from loci.evaluation.replay import BASELINES, CUTS, evaluate, replay, report_lines
from loci.evaluation.trail import CLASSES

__all__ = ["BASELINES", "CLASSES", "CUTS", "MIN_WINDOW", "checked", "evaluate", "numbers",
           "replay", "report_lines"]
