#!/usr/bin/python3
"""langchain_test.py VENV TFRUN INI [--set K=V ...] - tfrun serve under LangChain.

`langchain-openai`'s ChatOpenAI is how many agent programs reach a server:
invoke and stream, bind_tools with a forced tool (tool_choice "required" and
a named one) and with_structured_output (json_schema and function calling)
must come back parsed, which needs the server's constrained decoding.  The
package is pip-installed into a venv at VENV (tests/support/pyvenv.py).
"""
import json
import os
import sys


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import pyvenv                                            # noqa: E402

pyvenv.reexec(sys.argv[1], ["langchain-openai"], "import langchain_openai, pydantic")

from typing import Annotated, List, Optional            # noqa: E402

from langchain_core.messages import HumanMessage         # noqa: E402
from langchain_core.tools import tool                    # noqa: E402
from langchain_openai import ChatOpenAI                  # noqa: E402
from pydantic import BaseModel, Field                    # noqa: E402

from serve_test import KEY, run, sets_of                 # noqa: E402


def model(srv, **kw):
    return ChatOpenAI(base_url="http://127.0.0.1:%d/v1" % srv.port, api_key=KEY,
                      model="ling-nano", max_retries=0, timeout=120, **kw)


# ling-nano, a model of the KJV alone, never ends a string of its own
# accord: the schemas bound their strings so that replies end.
class VerseRef(BaseModel):
    """Look up a verse of the Bible."""
    book: str = Field(max_length=12)
    chapter: int = Field(ge=1, le=150)
    verse: Optional[int] = Field(default=None, ge=1, le=176)


class WordCount(BaseModel):
    """Count the words of a text."""
    text: str = Field(max_length=24)


@tool(args_schema=VerseRef)
def get_verse(book: str, chapter: int, verse: Optional[int] = None) -> str:
    """Look up a verse of the Bible."""
    return "%s %d:%s" % (book, chapter, verse)


@tool(args_schema=WordCount)
def count_words(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


class Verse(BaseModel):
    """A verse and where it stands."""
    book: str = Field(description="the book", max_length=12)
    chapter: int
    words: List[Annotated[str, Field(max_length=10)]] = Field(max_length=4)
    holy: bool


def t_invoke_stream(srv):
    m = model(srv, max_tokens=16, temperature=0)
    text = m.invoke([HumanMessage("In the beginning")]).content
    assert text, text
    assert "".join(c.content for c in m.stream("In the beginning")) == text


def t_tools_forced(srv):
    """bind_tools with a forced call: every reply is a well-formed call of
    a bound tool, its arguments typed as the tool's schema says."""
    m = model(srv, max_tokens=400, temperature=0.8)
    for choice in ("required", "get_verse", "any"):
        bound = m.bind_tools([get_verse, count_words], tool_choice=choice)
        for seed in range(3):
            msg = bound.bind(seed=seed).invoke("Which verse says let there be light?")
            assert msg.tool_calls, (choice, msg)
            for call in msg.tool_calls:
                assert call["name"] in ("get_verse", "count_words"), call
                if choice == "get_verse":
                    assert call["name"] == "get_verse", call
                tool_ = get_verse if call["name"] == "get_verse" else count_words
                tool_.invoke(call["args"])      # validates the arguments


def t_structured(srv):
    """with_structured_output: a Verse every time, by json_schema and by
    function calling, and a plain dict by json_mode."""
    m = model(srv, max_tokens=600, temperature=0.8)
    for method in ("json_schema", "function_calling"):
        s = m.with_structured_output(Verse, method=method)
        for seed in range(3):
            v = s.bind(seed=seed).invoke("Give the verse In the beginning God created "
                                         "the heaven and the earth.")
            assert isinstance(v, Verse) and len(v.words) <= 4, (method, v)
    # json_mode: any object; the string bound is the caller's, here none.
    d = model(srv, max_tokens=600, temperature=0).bind(
        response_format={"type": "json_schema", "json_schema": {"name": "d", "schema": {
            "type": "object", "properties": {"a": {"type": "string", "maxLength": 5}},
            "required": ["a"]}}}).invoke("Answer in JSON.")
    assert isinstance(json.loads(d.content), dict), d


if __name__ == "__main__":
    run(sys.argv[2], sys.argv[3], sets_of(sys.argv[4:]),
        [t_invoke_stream, t_tools_forced, t_structured])
