"""Without the ``mcp`` extra (a core install): the server runs, ``/mcp`` answers 501
with how to install it, and ``loci mcp`` says the same with exit code 2. Each in a child
process where the ``mcp`` package cannot be imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

WITHOUT_MCP = """
import json, sys
sys.modules["mcp"] = None  # as if not installed
from fastapi.testclient import TestClient
from loci import load_settings
from loci.server import create_app
app = create_app(load_settings(store="sqlite:///" + sys.argv[1] + "/loci.db"))
with TestClient(app, base_url="http://127.0.0.1") as client:
    answers = [client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
               client.get("/api/health")]
    print(json.dumps([[a.status_code, a.json()] for a in answers]))
sys.argv = ["loci", "mcp", "--store", "sqlite:///" + sys.argv[1] + "/loci.db"]
from loci.cli.app import main
sys.exit(main())
"""


def test_a_core_install_serves_without_mcp_and_says_how_to_add_it(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_MCP, str(tmp_path)],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    (mcp, mcp_body), (health, _) = json.loads(done.stdout.splitlines()[0])
    assert mcp == 501 and 'pip install "loci-context[mcp]"' in mcp_body["error"]["message"]
    assert health == 200
    assert done.returncode == 2
    assert 'pip install "loci-context[mcp]"' in done.stderr and "Traceback" not in done.stderr
