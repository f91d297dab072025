"""Model fallbacks: a model that is down (an outage, a timeout, a 429 after the retries, a
rejected key, a spent quota) hands the turn's call to the next model, which goes on where
the turn was; the failed model rests for a cooldown (on the injected clock, never a real
wait); the person is told once per outage. The scripted models fail through the real
litellm path as providers do."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from clawbot.app import Clawbot
from clawbot.clock import ManualClock
from clawbot.errors import ConfigError, ProviderError
from clawbot.runtime.llm import ModelClient
from clawbot.runtime.model_health import ModelHealth
from clawbot.runtime.text_stream import streaming_to
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedFailure, ScriptedModel, call

from .conftest import Chat, add_agent

ASK = [{"role": "user", "content": "hi"}]


@pytest.fixture
def primary() -> Iterator[ScriptedModel]:
    with ScriptedModel(name="primary").installed() as model:
        yield model


@pytest.fixture
def backup() -> Iterator[ScriptedModel]:
    with ScriptedModel(name="backup").installed() as model:
        yield model


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def fallback_settings(tmp_path: Path, primary: ScriptedModel, *fallbacks: str) -> Settings:
    return Settings(
        home=tmp_path / "home",
        model=primary.model_string,
        fallback_models=",".join(fallbacks),  # type: ignore[arg-type]  # as the variable reads
        provider_retries=1,
        retry_backoff=0,
        compaction_keep_turns=1,
        _env_file=None,  # type: ignore[call-arg]
    )


@pytest.fixture
async def bot(
    tmp_path: Path, primary: ScriptedModel, backup: ScriptedModel, clock: ManualClock
) -> AsyncIterator[Clawbot]:
    settings = fallback_settings(tmp_path, primary, backup.model_string)
    async with await Clawbot.open(settings, clock=clock) as opened:
        opened.connect(MemoryChannel())
        yield opened


def notices(channel: MemoryChannel) -> list[str]:
    return [m.text for m in channel.sent if m.kind == "notice"]


@pytest.mark.parametrize(
    "failure",
    [
        ScriptedFailure("server_error"),
        ScriptedFailure("timeout"),
        ScriptedFailure("rate_limit"),
        ScriptedFailure("rate_limit", retry_after=120),
        ScriptedFailure("auth"),
        ScriptedFailure("quota"),
    ],
    ids=["500", "timeout", "429", "429-retry-after", "401", "quota"],
)
async def test_a_model_that_is_down_hands_the_answer_to_the_fallback(
    chat: Chat, primary: ScriptedModel, backup: ScriptedModel, failure: ScriptedFailure
) -> None:
    primary.outage = failure
    backup.add("Answered by the backup.")

    handled = await chat.say("hi")

    assert handled.reply == "Answered by the backup."
    assert backup.requests[0].last_user_text == "hi"


async def test_an_outage_is_retried_before_the_call_moves_on(
    chat: Chat, primary: ScriptedModel, backup: ScriptedModel
) -> None:
    primary.outage = ScriptedFailure("server_error")

    await chat.say("hi")

    assert len(primary.requests) == 2  # the call and its one retry (provider_retries=1)
    assert len(backup.requests) == 1


@pytest.mark.parametrize(
    "failure",
    [
        ScriptedFailure("quota"),
        ScriptedFailure("auth"),
        ScriptedFailure("rate_limit", retry_after=120),
    ],
    ids=["quota", "401", "429-asking-for-120-s"],
)
async def test_a_failure_no_retry_can_mend_moves_on_without_retrying(
    chat: Chat, primary: ScriptedModel, backup: ScriptedModel, failure: ScriptedFailure
) -> None:
    primary.outage = failure

    await chat.say("hi")

    assert len(primary.requests) == 1
    assert len(backup.requests) == 1


async def test_a_turn_falls_back_mid_tool_loop_without_repeating_its_tool_round(
    bot: Clawbot, chat: Chat, primary: ScriptedModel, backup: ScriptedModel
) -> None:
    (bot.workspace.root / "notes.md").write_text("buy milk")
    primary.add(
        call("file_read", path="notes.md"),
        ScriptedFailure("server_error"),
        ScriptedFailure("server_error"),
    )
    backup.add("Your notes say: buy milk.")

    handled = await chat.say("what do my notes say?")

    assert handled.reply == "Your notes say: buy milk."
    (request,) = backup.requests
    assert request.tool_results == ["buy milk"]  # the round the primary made, not made again
    stored = await bot.store.transcripts.load("memory:chat1", 0)
    assert [e.role for e in stored] == ["user", "assistant", "tool", "assistant"]


async def test_a_request_too_long_is_compacted_not_handed_to_a_fallback(
    chat: Chat, primary: ScriptedModel, backup: ScriptedModel
) -> None:
    primary.add("One.")
    await chat.say("first")
    primary.add(ScriptedFailure("context_length"), "The person said first.", "Two.")

    handled = await chat.say("second")

    assert handled.reply == "Two."
    assert backup.requests == []
    assert "The person said first." in primary.requests[-1].system


async def test_the_failed_model_rests_for_the_cooldown_then_is_tried_again(
    chat: Chat, primary: ScriptedModel, backup: ScriptedModel, clock: ManualClock
) -> None:
    primary.outage = ScriptedFailure("server_error")
    await chat.say("one")
    primary.outage = None
    primary.add("The primary is back.")
    tried = len(primary.requests)

    resting = await chat.say("two")
    clock.advance(61)
    rested = await chat.say("three")

    assert resting.reply == "ok"  # the backup's default answer: the primary was not asked
    assert len(primary.requests) == tried + 1
    assert rested.reply == "The primary is back."


async def test_the_cooldown_doubles_while_the_model_keeps_failing(
    chat: Chat, primary: ScriptedModel, clock: ManualClock
) -> None:
    primary.outage = ScriptedFailure("server_error")
    await chat.say("one")  # fails: rests 60 s
    clock.advance(61)
    await chat.say("two")  # tried, fails again: rests 120 s
    asked = len(primary.requests)

    clock.advance(61)
    await chat.say("three")
    still_resting = len(primary.requests) - asked
    clock.advance(60)
    await chat.say("four")

    assert still_resting == 0
    assert len(primary.requests) > asked


async def test_a_429_asking_for_longer_than_the_cooldown_rests_the_model_that_long(
    chat: Chat, primary: ScriptedModel, clock: ManualClock
) -> None:
    primary.outage = ScriptedFailure("rate_limit", retry_after=300)
    await chat.say("one")
    primary.outage = None
    asked = len(primary.requests)

    clock.advance(61)
    await chat.say("two")
    after_the_cooldown = len(primary.requests) - asked
    clock.advance(240)
    await chat.say("three")

    assert after_the_cooldown == 0
    assert len(primary.requests) == asked + 1


async def test_the_person_is_told_once_per_outage(
    chat: Chat, channel: MemoryChannel, primary: ScriptedModel, clock: ManualClock
) -> None:
    primary.outage = ScriptedFailure("server_error")
    await chat.say("one")
    await chat.say("two")
    told_in_the_first_outage = notices(channel)
    clock.advance(61)
    primary.outage = None
    await chat.say("three")  # the primary answers: that outage is over
    primary.outage = ScriptedFailure("timeout")
    await chat.say("four")

    assert told_in_the_first_outage == [
        "scripted/primary had a server error, so scripted/backup answers for now; "
        "I go back to scripted/primary once it works again."
    ]
    assert len(notices(channel)) == 2
    assert "scripted/primary did not answer in time" in notices(channel)[1]


async def test_status_shows_the_fallbacks_and_which_model_answered_last(
    chat: Chat, primary: ScriptedModel
) -> None:
    primary.outage = ScriptedFailure("server_error")
    await chat.say("hi")

    handled = await chat.say("/status")

    assert handled.reply is not None
    lines = handled.reply.splitlines()
    assert "Fallbacks: scripted/backup" in lines
    assert "Last answer by: scripted/backup (a fallback)" in lines
    assert any(
        line.startswith("scripted/primary is unavailable since") and "had a server error" in line
        for line in lines
    )


async def test_an_agents_fallback_models_replace_the_global_list(
    bot: Clawbot, chat: Chat, primary: ScriptedModel, backup: ScriptedModel
) -> None:
    with ScriptedModel(name="spare").installed() as spare:
        await add_agent(bot, "careful", fallback_models=[spare.model_string])
        await chat.say("/agent careful")
        primary.outage = ScriptedFailure("server_error")
        spare.add("From the spare.")

        handled = await chat.say("hi")

    assert handled.reply == "From the spare."
    assert backup.requests == []


async def test_an_agent_with_an_empty_fallback_list_has_none(
    bot: Clawbot, chat: Chat, primary: ScriptedModel, backup: ScriptedModel
) -> None:
    await add_agent(bot, "alone", fallback_models=[])
    await chat.say("/agent alone")
    primary.outage = ScriptedFailure("server_error")

    handled = await chat.say("hi")
    await chat.say("again")

    assert handled.reply is not None
    assert handled.reply.startswith("The model provider is unavailable")
    assert backup.requests == []
    assert len(primary.requests) == 4  # with no fallback, each message tries it (and a retry)


async def test_the_reply_names_the_model_that_answered(
    primary: ScriptedModel, backup: ScriptedModel
) -> None:
    client = ModelClient(backoff=0, retries=0)
    first = await client.complete(primary.model_string, ASK, fallbacks=[backup.model_string])
    primary.outage = ScriptedFailure("server_error")
    second = await client.complete(primary.model_string, ASK, fallbacks=[backup.model_string])

    assert first.model == primary.model_string
    assert second.model == backup.model_string


class Sink:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def on_text(self, text: str) -> None:
        self.texts.append(text)

    def on_call_end(self, tool_calls: bool) -> None:
        pass


async def test_a_stream_that_fails_before_its_first_chunk_falls_back(
    primary: ScriptedModel, backup: ScriptedModel
) -> None:
    primary.outage = ScriptedFailure("server_error")
    backup.add("From the backup.")
    sink = Sink()

    with streaming_to(sink):
        reply = await ModelClient(backoff=0, retries=0).complete(
            primary.model_string, ASK, fallbacks=[backup.model_string]
        )

    assert reply.text == "From the backup."
    assert sink.texts[-1] == "From the backup."


async def test_a_stream_broken_mid_answer_is_not_handed_to_a_fallback(
    primary: ScriptedModel, backup: ScriptedModel
) -> None:
    # the person read the start: another model's answer would not follow it
    primary.add(ScriptedFailure("server_error", partial="The first half"))

    with streaming_to(Sink()), pytest.raises(ProviderError, match="in the middle"):
        await ModelClient(backoff=0, retries=0).complete(
            primary.model_string, ASK, fallbacks=[backup.model_string]
        )

    assert backup.requests == []


async def test_when_every_model_rests_the_one_resting_least_is_tried(
    primary: ScriptedModel, backup: ScriptedModel, clock: ManualClock
) -> None:
    health = ModelHealth(cooldown=60, clock=clock)
    client = ModelClient(backoff=0, retries=0, health=health)
    health.failed(backup.model_string, "had a server error")  # rests until 60 s
    clock.advance(1)
    health.failed(primary.model_string, "had a server error")  # rests until 61 s

    reply = await client.complete(primary.model_string, ASK, fallbacks=[backup.model_string])

    assert reply.model == backup.model_string
    assert primary.requests == []


# Bad input ----------------------------------------------------------------------------


async def test_unknown_fallback_models_are_refused_at_start_naming_them(
    tmp_path: Path, primary: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings = fallback_settings(
        tmp_path, primary, "openai/gpt-4o-mini", "openai/gpt-4o-mnii", "nosuch/model"
    )

    with pytest.raises(ConfigError) as refused:
        await Clawbot.open(settings)

    message = str(refused.value)
    assert "CLAWBOT_FALLBACK_MODELS names unknown models" in message
    assert "openai/gpt-4o-mnii" in message and "nosuch/model" in message
    assert "openai/gpt-4o-mini (" not in message


async def test_an_agent_file_naming_an_unknown_fallback_model_is_refused_at_start(
    tmp_path: Path, primary: ScriptedModel
) -> None:
    settings = fallback_settings(tmp_path, primary)
    settings.agents_dir.mkdir(parents=True)
    (settings.agents_dir / "careful.toml").write_text(
        'agent_id = "careful"\nname = "careful"\nfallback_models = ["nosuch/model"]\n'
    )

    with pytest.raises(ConfigError, match="agent 'careful' fallback_models names unknown models"):
        await Clawbot.open(settings)


def test_a_fallback_list_entry_without_a_provider_is_a_settings_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from clawbot.settings import load_settings

    monkeypatch.setenv("CLAWBOT_FALLBACK_MODELS", "openai/gpt-4o,gpt-4o-mini")

    with pytest.raises(ConfigError, match="'gpt-4o-mini': write each model as provider/model"):
        load_settings()


async def test_the_log_says_which_model_answered_in_place_of_which(
    chat: Chat, primary: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="clawbot.llm")
    primary.outage = ScriptedFailure("server_error")

    await chat.say("hi")

    assert "scripted/primary had a server error: the call moves to scripted/backup" in caplog.text
    assert "answered by scripted/backup, a fallback for scripted/primary" in caplog.text


async def test_a_summary_written_mid_turn_while_the_model_is_down_comes_from_the_fallback(
    chat: Chat, primary: ScriptedModel, backup: ScriptedModel
) -> None:
    primary.add("One.")
    await chat.say("first")
    primary.outage = ScriptedFailure("server_error")
    backup.add(ScriptedFailure("context_length"), "The person said first.", "Two.")

    handled = await chat.say("second")

    assert handled.reply == "Two."
    assert "The person said first." in backup.requests[-1].system


def test_the_cooldown_grows_no_longer_than_its_maximum(clock: ManualClock) -> None:
    health = ModelHealth(cooldown=60, cooldown_max=200, clock=clock)

    rests = [health.failed("p/m", "had a server error").resting_until - 1000 for _ in range(4)]

    assert rests == [60, 120, 200, 200]


def test_a_retry_waits_what_a_429_asks_up_to_30_seconds() -> None:
    import httpx

    from clawbot.providers import litellm_module
    from clawbot.runtime.provider_errors import wait_before_retry

    def limited(seconds: str) -> Exception:
        response = httpx.Response(429, headers={"retry-after": seconds})
        return litellm_module().RateLimitError(  # type: ignore[no-any-return]
            message="slow down", llm_provider="openai", model="m", response=response
        )

    assert wait_before_retry(1.0, limited("12")) == 12
    assert wait_before_retry(1.0, limited("300")) == 30
    assert wait_before_retry(2.0, litellm_module().Timeout("late", "m", "openai")) == 2
