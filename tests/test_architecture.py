"""docs/architecture.md stays true: it names every module, and no import breaks the
layer order its diagram draws (each line may import only its own line and those above)."""

from __future__ import annotations

import ast
import fnmatch
import re
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "loci"
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def layers() -> dict[str, int]:
    """Unit (top-level module or package) → its line in the diagram, foundation first."""
    block = DOC.split("## Parts", 1)[1].split("```", 2)[1]
    ranks: dict[str, int] = {}
    rank = 0
    for line in block.splitlines():
        line = re.sub(r"\(.*?\)", "", line).strip()
        if not line or set(line) <= {"▲", " "}:
            continue
        for name in re.split(r"[\s·,⇄]+", line):
            if name:
                ranks[name] = rank
        rank += 1
    return ranks


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path) -> set[str]:
    """Loci modules imported by ``path`` (outside ``if TYPE_CHECKING`` blocks)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
               and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "loci":
                found.add("loci")
            elif node.module.startswith("loci."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("loci.")}
    return found


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_is_named_in_the_architecture() -> None:
    named = set(re.findall(r"`([^`\s]+\.py)`", DOC))
    missing = []
    for path in modules():
        relative = path.relative_to(PACKAGE).as_posix()
        if path.name in ("__init__.py", "__main__.py"):
            continue
        if not any(fnmatch.fnmatch(relative, n) or n == path.name
                   or fnmatch.fnmatch(path.name, n) for n in named):
            missing.append(relative)
    assert not missing, f"not named in docs/architecture.md: {missing}"


def test_the_architecture_is_self_contained() -> None:
    assert "../" not in DOC, "docs/architecture.md points outside the repository"


def test_no_import_breaks_the_layer_order() -> None:
    ranks = layers()
    edges: set[tuple[str, str]] = set()
    broken = []
    for path in modules():
        relative = path.relative_to(PACKAGE).with_suffix("")
        source = unit_of(".".join(["loci", *relative.parts]))
        assert source in ranks, f"{source} is not in the diagram of docs/architecture.md"
        for module in imports(path):
            target = unit_of(module)
            if target == source:
                continue
            assert target in ranks, f"{target} is not in the diagram of docs/architecture.md"
            edges.add((source, target))
            if ranks[target] > ranks[source]:
                broken.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert not broken, "imports upward:\n" + "\n".join(broken)
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as cycle:
        raise AssertionError(f"units that import each other in a circle: {cycle.args[1]}") \
            from None


def test_the_backends_mirror_each_other_and_neither_imports_the_other() -> None:
    store = PACKAGE / "store"
    sqlite = {p.name for p in (store / "sqlite").glob("*.py")}
    postgres = {p.name for p in (store / "postgres").glob("*.py")}
    assert {"store.py", "events.py", "transfer.py"} <= sqlite
    assert sqlite == postgres, f"modules on one side only: {sqlite ^ postgres}"
    for side, other in (("sqlite", "postgres"), ("postgres", "sqlite")):
        for path in (store / side).glob("*.py"):
            crossing = [m for m in imports(path) if m.startswith(f"loci.store.{other}")]
            assert not crossing, f"{path.relative_to(PACKAGE)} imports {crossing}"
            # A part calls another through the contract its base extends, never a stub.
            assert "NotImplementedError" not in path.read_text(encoding="utf-8"), path.name


#: The faces: the top line of the diagram.
FACES = ("cli", "server", "__main__", "integrations", "evaluation", "testing")
#: What a face may import besides its own package.
FACE_IMPORTS = (
    "loci",  # the public API
    # the foundation line: errors, shapes, clock, settings, checks, token counts and
    # prices every layer shares (for the names the public API does not export)
    "loci.errors", "loci.models", "loci.timeutil", "loci.settings", "loci.checks",
    "loci.tokens", "loci.pricing",
    "loci.apis",  # the provider APIs' wire shapes, read and written by the proxy's faces
)
#: A face that starts or stands in for another face, where that is the point.
FACE_TO_FACE = {
    "__main__.py": ("loci.cli",),  # python -m loci is the CLI
    "cli/commands/server.py": ("loci.server", "loci.testing"),  # loci serve (--upstream echo)
    "cli/commands/mcp.py": ("loci.server",),  # loci mcp serves the server's MCP face
    "cli/commands/evaluation.py": ("loci.evaluation",),  # loci eval runs the evaluation
    "server/api_eval.py": ("loci.evaluation",),  # so does the dashboard's eval page
    "testing/*.py": ("loci.llm.base",),  # the fakes implement the chat-model protocol
}
NOT_YET: dict[str, tuple[str, ...]] = {}


def face_modules() -> list[Path]:
    return [PACKAGE / "__main__.py", *(p for face in FACES if face != "__main__"
                                      for p in sorted((PACKAGE / face).rglob("*.py")))]


def allowed_for(relative: str) -> tuple[str, ...]:
    extra = [m for table in (FACE_TO_FACE, NOT_YET) for pattern, modules in table.items()
             if fnmatch.fnmatch(relative, pattern) for m in modules]
    return (*FACE_IMPORTS, f"loci.{relative.split('/')[0].removesuffix('.py')}", *extra)


def within(module: str, allowed: tuple[str, ...]) -> bool:
    """``module`` is one of ``allowed`` or inside one (``loci`` itself: only ``loci``)."""
    return any(module == a or a == "*" or (a != "loci" and module.startswith(a + "."))
               for a in allowed)


def test_the_faces_reach_loci_through_the_public_api() -> None:
    import loci

    reaching, detour = [], []
    for path in face_modules():
        relative = path.relative_to(PACKAGE).as_posix()
        allowed = allowed_for(relative)
        reaching += [f"{relative} imports {m}" for m in sorted(imports(path))
                     if not within(m, allowed) or m.startswith("loci.store")]
        if any(fnmatch.fnmatch(relative, pattern) for pattern in NOT_YET):
            continue
        # A name the public API exports comes from it, not from the module behind it.
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                    and node.module.startswith("loci.") and not within(
                        node.module, (f"loci.{relative.split('/')[0].removesuffix('.py')}",)):
                detour += [f"{relative}: from loci import {a.name} (not {node.module})"
                           for a in node.names if a.name in loci.__all__]
    assert not reaching, "\n".join(reaching)
    assert not detour, "\n".join(detour)


#: Modules stay small enough to read in one sitting; split one by domain past this.
MAX_MODULE_LINES = 500


def test_no_module_is_longer_than_the_limit() -> None:
    long = {str(path.relative_to(PACKAGE)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split these modules by domain: {long}"


#: What offline text analysis may import: Loci's basics, nothing that calls a model or
#: stores anything.
TEXT_IMPORTS = ("loci.text", "loci.models", "loci.timeutil", "loci.tokens", "loci.errors")


def test_text_analysis_is_a_leaf_and_llm_holds_providers_only() -> None:
    leaking = [f"text/{path.name} imports {m}" for path in (PACKAGE / "text").glob("*.py")
               for m in imports(path) if not m.startswith(TEXT_IMPORTS)]
    assert not leaking, "\n".join(leaking)
    # The domains reach llm/ for a chat model only: the seam and the protocol.
    reaching = []
    for domain in ("memory", "knowledge", "context", "compaction", "text"):
        for path in (PACKAGE / domain).rglob("*.py"):
            reaching += [f"{path.relative_to(PACKAGE)} imports {m}" for m in imports(path)
                         if m.startswith("loci.llm")
                         and m not in ("loci.llm", "loci.llm.base")]
    assert not reaching, "\n".join(reaching)
    for path in (PACKAGE / "llm").glob("*.py"):
        assert not [m for m in imports(path) if m.startswith(("loci.text", "loci.testing"))
                    ], f"llm/{path.name} is a provider: no text analysis, no fakes"


def test_nothing_runs_on_the_fakes_but_the_echo_upstream() -> None:
    """The fakes of tests and benchmarks (``loci.testing``) load at run time only where a
    user asks for them: ``loci serve --upstream echo``."""
    faking = [str(path.relative_to(PACKAGE)) for path in modules()
              if "testing" not in path.relative_to(PACKAGE).parts
              and any(m.startswith("loci.testing") for m in imports(path))]
    assert faking == ["cli/commands/server.py"], faking


#: The wire path: the provider APIs' modules, the exchange, the upstreams and their
#: clients, the proxy's faces (``benchmarks/RESULTS.md``, #45).
WIRE_PATH = ("apis/*.py", "exchange.py", "upstreams.py", "llm/openai_compat.py",
             "llm/anthropic.py", "server/proxy*.py")


def test_json_on_the_wire_path_has_a_shape() -> None:
    """A body built for or read from the wire is one of its API's shapes
    (``apis/shapes.py``) or, where it passes through as it came, a ``JSONObject``: never
    an untyped ``dict[str, Any]``."""
    untyped = [f"{path.relative_to(PACKAGE)}:{number}"
               for pattern in WIRE_PATH for path in sorted(PACKAGE.glob(pattern))
               for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
               if "dict[str, Any]" in line]
    assert not untyped, "\n".join(untyped)
