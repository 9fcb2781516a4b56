"""Test doubles of the paid outside services, shipped in the package so that tests and
benchmarks exercise real code paths: a scripted chat model (``scripted``) and a fake LLM
provider over real HTTP on loopback (``fake_provider``) that follows the providers'
published rules (``provider_rules``) and prompt caches (``prompt_cache``). Nothing in
Loci imports this package at run time, except ``loci serve --upstream echo``.
"""

from loci.testing.fake_answers import Reply
from loci.testing.fake_provider import FakeProvider, Fault, Request, echo_reply, fixed_usage
from loci.testing.scripted import ScriptedChatModel

__all__ = ["FakeProvider", "Fault", "Reply", "Request", "ScriptedChatModel", "echo_reply",
           "fixed_usage"]
