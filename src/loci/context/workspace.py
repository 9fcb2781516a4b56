"""Workspace files: looked up in the current directory, then the
``--workspace`` directory, then ``$LOCI_HOME``; for each file the first match wins."""

from __future__ import annotations

import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from loci.context.skills import LoadedSkill, SkillSet, load_skill_set, match_skills

IDENTITY_FILES = ("SOUL.md", "IDENTITY.md")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_EMPTY_FIELD = re.compile(r"^[ \t]*[-*+][ \t]+[^:\n]{1,80}:[ \t]*$\n?", re.MULTILINE)
_HEADING = re.compile(r"^\s*#{1,6}\s")
MAX_FILE_CHARS = 200_000


@dataclass(frozen=True)
class WorkspaceFile:
    name: str
    path: Path
    text: str


class Workspace:
    """Finds workspace files across an ordered list of directories."""

    def __init__(self, directories: Sequence[Path]) -> None:
        self.directories = list(dict.fromkeys(d.expanduser() for d in directories))

    @classmethod
    def around(cls, workspace: Path | None, home: Path) -> Workspace:
        """The usual search path: the current directory, the configured workspace (if
        any), then ``$LOCI_HOME``."""
        return cls([Path.cwd(), *([workspace] if workspace is not None else []), home])

    def find(self, *names: str) -> WorkspaceFile | None:
        """The first existing file among ``names`` in the first directory holding one."""
        for directory in self.directories:
            for name in names:
                path = directory / name
                try:
                    info = path.stat()
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    text = _read(path, info.st_mtime_ns, info.st_ctime_ns, info.st_size)
                    return WorkspaceFile(name, path, text)
        return None

    def identity(self) -> WorkspaceFile | None:
        return self.find(*IDENTITY_FILES)

    def skills(self) -> SkillSet:
        """The skills in the directories' ``skills/`` folders, the first of a name winning."""
        return load_skill_set(self.directories)

    def match_skills(self, message: str) -> list[tuple[LoadedSkill, int]]:
        """Every skill that ``message`` triggers with its score, best first."""
        return match_skills(self.skills().skills, message)


@lru_cache(maxsize=128)
def _read(path: Path, mtime_ns: int, ctime_ns: int, size: int) -> str:
    """A workspace file's text for the model, read once per version: every compile
    looks the files up, and only a changed mtime, ctime or size means reading again."""
    text = path.read_text(encoding="utf-8", errors="replace")
    # Template comments and fields left empty are for the human editing the file.
    text = _EMPTY_FIELD.sub("", _COMMENT.sub("", text[:MAX_FILE_CHARS]))
    if all(_HEADING.match(line) for line in text.splitlines() if line.strip()):
        return ""  # nothing but headings: an untouched template
    return re.sub(r"\n{3,}", "\n\n", text).strip()
