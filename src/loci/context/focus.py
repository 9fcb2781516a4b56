"""Focus: the goal of a goal-driven run, weighted success criteria,
constraints and the current evaluation status. Stored per session in state."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from loci.checks import check_text
from loci.errors import ValidationError
from loci.models import Scope
from loci.store import Store

STATE_PREFIX = "focus:"


@dataclass(frozen=True)
class Criterion:
    text: str
    weight: float = 1.0

    @classmethod
    def parse(cls, text: str) -> Criterion:
        """``"tests pass:3"`` → Criterion("tests pass", 3.0); no weight means 1."""
        body, _, weight = text.rpartition(":")
        if body and weight.strip().replace(".", "", 1).isdigit():
            return cls(body.strip(), float(weight))
        return cls(text.strip())


@dataclass(frozen=True)
class Focus:
    goal: str
    criteria: tuple[Criterion, ...] = ()
    constraints: tuple[str, ...] = ()
    status: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def render(self) -> str:
        lines = [f"## Focus\nGoal: {self.goal}"]
        if self.criteria:
            total = sum(c.weight for c in self.criteria) or 1.0
            lines.append("Success criteria:")
            lines += [f"- {c.text} (weight {c.weight / total:.0%})" for c in self.criteria]
        if self.constraints:
            lines.append("Constraints:")
            lines += [f"- {c}" for c in self.constraints]
        if self.status:
            lines.append(f"Current evaluation: {self.status}")
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps({
            "goal": self.goal,
            "criteria": [{"text": c.text, "weight": c.weight} for c in self.criteria],
            "constraints": list(self.constraints),
            "status": self.status,
        }, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> Focus:
        try:
            data = json.loads(text)
            return Focus(
                goal=str(data["goal"]),
                criteria=tuple(Criterion(str(c["text"]), float(c.get("weight", 1.0)))
                               for c in data.get("criteria", [])),
                constraints=tuple(str(c) for c in data.get("constraints", [])),
                status=str(data.get("status", "")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValidationError(f"stored focus is not valid: {exc}") from exc


def save_focus(store: Store, scope: Scope, session: str, focus: Focus | None,
               now: datetime) -> None:
    """Keep ``focus`` as the session's state (None: clear it)."""
    if focus is None:
        store.delete_state(scope, STATE_PREFIX + session)
        return
    for text in (focus.goal, focus.status, *focus.constraints,
                 *(criterion.text for criterion in focus.criteria)):
        check_text("focus", text)
    store.set_state(scope, STATE_PREFIX + session, focus.to_json(), now)
