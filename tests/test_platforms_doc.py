"""The Slack app manifest in docs/platforms.md is the one a user pastes: it must register the
slash command clawbot listens for and ask for the scopes and events it uses."""

from __future__ import annotations

import re
from pathlib import Path

from adapters.slack.commands import DEFAULT_COMMAND

PLATFORMS = Path(__file__).resolve().parent.parent / "docs" / "platforms.md"


def slack_manifest() -> str:
    section = PLATFORMS.read_text().split("## Slack", 1)[1]
    found = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert found is not None, "docs/platforms.md: no manifest under ## Slack"
    return found.group(1)


def listed(manifest: str, key: str) -> set[str]:
    """The items of a flow list such as ``bot: [a, b,\n c]``."""
    found = re.search(rf"\b{key}: \[([^\]]*)\]", manifest)
    assert found is not None, f"the manifest has no {key} list"
    return {item.strip() for item in found.group(1).split(",")}


def test_the_slack_manifest_registers_the_slash_command_clawbot_listens_for() -> None:
    assert re.search(rf"- command: {re.escape(DEFAULT_COMMAND)}\s", slack_manifest())


def test_the_slack_manifest_asks_for_the_scopes_names_and_commands_need() -> None:
    scopes = listed(slack_manifest(), "bot")
    assert {"users:read", "commands", "chat:write", "im:history", "app_mentions:read"} <= scopes


def test_the_slack_manifest_asks_for_files_write_which_sending_files_needs() -> None:
    assert "files:write" in listed(slack_manifest(), "bot")


def test_the_slack_manifest_subscribes_to_messages_and_mentions_and_turns_on_buttons() -> None:
    manifest = slack_manifest()
    assert {"app_mention", "message.im", "message.channels"} <= listed(manifest, "bot_events")
    assert "interactivity: {is_enabled: true}" in manifest
