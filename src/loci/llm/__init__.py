"""Chat providers for summaries and extraction behind one small interface."""

from loci.llm.base import ChatModel, ChatReply
from loci.llm.scripted import ScriptedChatModel

__all__ = ["ChatModel", "ChatReply", "ScriptedChatModel"]
