"""Log lines carry the active agent's alias and never a secret."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest

from clawbot.logs import RedactingFormatter, SecretRedactor, agent_scope, redactor, setup_logging
from clawbot.messages import INTERNAL_CHANNEL, TextBlock, TranscriptEntry
from clawbot.routing.sessions import Session, child_key
from clawbot.testing import ScriptedModel, call

from .conftest import Chat


@pytest.fixture
def log_lines(capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[[], list[str]]]:
    setup_logging("INFO", ["xoxb-my-slack-secret-token"])
    yield lambda: capsys.readouterr().err.splitlines()
    for handler in list(logging.getLogger().handlers):
        if getattr(handler, "_clawbot", False):
            logging.getLogger().removeHandler(handler)


def test_lines_outside_a_turn_are_prefixed_system(log_lines: Callable[[], list[str]]) -> None:
    logging.getLogger("clawbot.test").info("starting up")

    assert log_lines()[-1].split(" ", 2)[2].startswith("[system] INFO clawbot.test: starting up")


def test_lines_inside_an_agent_scope_carry_its_alias(log_lines: Callable[[], list[str]]) -> None:
    with agent_scope("coder"):
        logging.getLogger("clawbot.test").info("working")

    assert "[coder] INFO clawbot.test: working" in log_lines()[-1]


async def test_a_turn_logs_under_the_agent_alias(
    log_lines: Callable[[], list[str]], chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("list_dir"), "done")

    await chat.say("look around")

    assert any("[main] INFO clawbot.runtime: tool list_dir" in line for line in log_lines())


def test_a_subagents_scope_reads_as_the_chain_from_the_root(
    log_lines: Callable[[], list[str]],
) -> None:
    with agent_scope("main", "researcher"):
        logging.getLogger("clawbot.test").info("digging")

    assert "[main>researcher] INFO clawbot.test: digging" in log_lines()[-1]


async def test_a_grandchilds_turn_logs_under_the_chain_of_agents_from_the_root(
    log_lines: Callable[[], list[str]], chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add("hello")
    await chat.say("hi")
    root_key = f"memory:{chat.chat_id}"
    store = chat.bot.store
    child = await store.sessions.create(_child(root_key, "r1", "researcher"))
    grandchild = await store.sessions.create(_child(child.key, "w1", "coder"))
    scripted.add(call("list_dir"), "done")

    handle = await chat.bot.scheduler.submit(grandchild, _task("look around"), lane="subagent")
    assert handle is not None
    await handle.outcome()

    assert any(
        "[main>researcher>coder] INFO clawbot.runtime: tool list_dir" in line
        for line in log_lines()
    )


def _child(parent_key: str, child_id: str, agent_id: str) -> Session:
    key = child_key(parent_key, child_id)
    return Session(
        key=key,
        channel=INTERNAL_CHANNEL,
        chat_id=key,
        agent_id=agent_id,
        deliver=False,
        owner_key=parent_key,
    )


def _task(text: str) -> TranscriptEntry:
    return TranscriptEntry(role="user", content=(TextBlock(text=text),))


def test_registered_secrets_are_redacted(log_lines: Callable[[], list[str]]) -> None:
    logging.getLogger("clawbot.test").warning("token is xoxb-my-slack-secret-token here")

    line = log_lines()[-1]
    assert "xoxb-my-slack-secret-token" not in line
    assert "[redacted]" in line


def test_secrets_from_the_environment_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "plain-value-without-a-known-shape")
    local = SecretRedactor()
    local.add_from_environment()

    assert local.redact("key=plain-value-without-a-known-shape") == "key=[redacted]"


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
        "xoxb-123456789012-abcdefghijklmnop",
        "xapp-1-A0123456789-abcdefghijklmnop",
        "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ",
    ],
)
def test_credential_shaped_strings_are_redacted_even_when_unknown(secret: str) -> None:
    assert secret not in SecretRedactor().redact(f"calling with {secret}!")


def test_exception_tracebacks_are_redacted_too() -> None:
    redactor.add("hunter2-hunter2")
    formatter = RedactingFormatter("%(message)s")
    try:
        raise RuntimeError("bad password hunter2-hunter2")
    except RuntimeError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, None)
        import sys

        record.exc_info = sys.exc_info()

    assert "hunter2-hunter2" not in formatter.format(record)
