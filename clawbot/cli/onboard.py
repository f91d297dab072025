"""``clawbot onboard``: the first run in a terminal. The steps, checks and files are
``clawbot.setup``'s (the console's first page uses them too); this is the asking.

Secrets are read with the terminal's echo off and never printed; nothing is written until
every answer is in, so Ctrl-C or the end of input leaves the files as they were.
"""

from __future__ import annotations

import select
import sys
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer

from clawbot.cli.common import HomeOption, ModelOption, fail, load
from clawbot.errors import ClawbotError

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Coroutine

    from pydantic import SecretStr

    from clawbot.settings import DmPolicy, Settings
    from clawbot.setup.answers import OnboardAnswers
    from clawbot.setup.home_files import HomeSettings
    from clawbot.setup.platforms import PlatformName


T = TypeVar("T")
SIGNAL_LOOK = 0.2
"""Seconds between looks for a pending Ctrl-C while a typed line is awaited. A Ctrl-C that
lands after the prompt is shown but before the read starts is taken by Python's handler
without interrupting the read, which then waits for the next key: the person presses Ctrl-C
and nothing happens. Waiting in short ``select`` rounds lets it raise at the next round."""
Checked = Literal["ok", "rejected", "failed"]


class Terminal:
    """Questions on stdout, answers from stdin, one line each (the terminal edits the line).
    The end of input is EOFError, as ``input()`` has it."""

    def say(self, text: str = "") -> None:
        print(text, flush=True)

    def ask(self, question: str, default: str = "") -> str:
        shown = f"{question} [{default}]: " if default else f"{question}: "
        return self._line(shown).strip() or default

    def ask_secret(self, question: str) -> str:
        """A line read with the terminal's echo off (restored however the read ends)."""
        if not sys.stdin.isatty():
            return self._line(f"{question}: ").strip()
        import termios

        descriptor = sys.stdin.fileno()
        before = termios.tcgetattr(descriptor)
        quiet = list(before)
        quiet[3] &= ~termios.ECHO
        termios.tcsetattr(descriptor, termios.TCSADRAIN, quiet)
        try:
            return self._line(f"{question} (hidden): ").strip()
        finally:
            termios.tcsetattr(descriptor, termios.TCSADRAIN, before)
            print(flush=True)  # the Enter typed was not echoed either

    @staticmethod
    def _line(prompt: str) -> str:
        sys.stdout.write(prompt)
        sys.stdout.flush()
        if sys.stdin.isatty():  # a terminal hands over one line a read: none waits buffered
            while not select.select([sys.stdin], [], [], SIGNAL_LOOK)[0]:
                pass
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")


class Wizard:
    """The questions in order, each asked again until its answer checks out."""

    def __init__(self, settings: Settings, runner: asyncio.Runner, ui: Terminal) -> None:
        self.settings = settings
        self.runner = runner
        self.ui = ui

    def check(self, what: str, work: Coroutine[Any, Any, T]) -> tuple[Checked, T | None]:
        """Run a check: ("ok", its result), ("rejected", None) or ("failed", None), having
        said which (a refusal says no more than that: never which part, never the secret)."""
        from clawbot.errors import CheckFailed, CredentialsRejected

        self.ui.say(f"Checking {what}…")
        try:
            return "ok", self.runner.run(work)
        except CredentialsRejected as exc:
            self.ui.say(f"Rejected: {exc.message}. Enter it again.")
            return "rejected", None
        except CheckFailed as exc:
            self.ui.say(f"Not checked: {exc}")
            return "failed", None

    def secret(self, question: str, kept: SecretStr | None) -> SecretStr | None:
        """A secret typed, or ``kept`` on Enter when there is one; None when nothing was
        typed and nothing is kept."""
        from pydantic import SecretStr

        hint = " — Enter keeps the one set" if kept is not None else ""
        value = self.ui.ask_secret(f"{question}{hint}")
        return SecretStr(value) if value else kept

    def model(self, default: str) -> tuple[str, tuple[str, SecretStr] | None]:
        import os

        from pydantic import SecretStr

        from clawbot.setup.model_check import check_model, current_key, key_names

        self.ui.say(
            "\n1. The model (any litellm model string: openai/gpt-4o-mini, "
            "anthropic/claude-sonnet-4-5, ollama/llama3.2 …)"
        )
        while True:
            model = self.ui.ask("Model", default)
            names = key_names(model)
            held = current_key(names)
            while True:
                key: tuple[str, SecretStr] | None = None
                if names:
                    kept = SecretStr(os.environ[held]) if held else None
                    value = self.secret(f"{names[0]} (the provider's API key)", kept)
                    if value is None:
                        self.ui.say(f"{model} needs a key in {' or '.join(names)}.")
                        continue
                    key = (held if value is kept and held else names[0], value)
                status, _ = self.check(f"{model} with one short call", check_model(model, key))
                if status == "ok":
                    self.ui.say(f"ok: {model} answered.")
                    return model, key
                if status == "failed" and self._keep_unchecked():
                    return model, key
                if status == "failed" or not names:
                    break  # ask for the model again
                held = None  # rejected: Enter no longer keeps it
            default = model

    def _keep_unchecked(self) -> bool:
        answer = self.ui.ask("Type keep to use it unchecked, or Enter to change it")
        return answer.lower() == "keep"

    def platform(self, chosen: PlatformName | None) -> tuple[PlatformName, dict[str, SecretStr]]:
        from clawbot.setup.platforms import (
            PLATFORM_NAMES,
            PLATFORMS,
            check_platform,
            slack_manifest,
            token_problem,
        )

        self.ui.say("\n2. The platform (one now; run clawbot onboard again for another)")
        while chosen is None:
            answer = self.ui.ask(f"Platform ({', '.join(PLATFORM_NAMES)})", "telegram").lower()
            if answer in PLATFORM_NAMES:
                chosen = answer
            else:
                self.ui.say(f"{answer!r} is not one of {', '.join(PLATFORM_NAMES)}.")
        setup = PLATFORMS[chosen]
        self.ui.say(setup.how)
        if chosen == "slack":
            self.ui.say("\n" + slack_manifest(self.settings.slack_command))
        offer_kept = True
        while True:
            tokens: dict[str, SecretStr] = {}
            for field in setup.tokens:
                while field.setting not in tokens:
                    kept = getattr(self.settings, field.setting) if offer_kept else None
                    value = self.secret(field.label, kept)
                    problem = token_problem(field, value.get_secret_value() if value else "")
                    if problem or value is None:
                        self.ui.say(f"That will not do: {problem}.")
                    else:
                        tokens[field.setting] = value
            status, identity = self.check(
                f"with {setup.title}", check_platform(chosen, tokens, self.settings)
            )
            if status == "ok" and identity is not None:
                self.ui.say(f"ok: {setup.title} knows this bot as {identity.name}.")
                return chosen, tokens
            if status == "failed" and self._keep_unchecked():
                return chosen, tokens
            offer_kept = False  # what was set is what failed

    def access(
        self, platform: PlatformName, current: HomeSettings
    ) -> tuple[DmPolicy, tuple[str, ...]]:
        from clawbot.setup.answers import DM_POLICIES, access_problem, parse_senders
        from clawbot.setup.platforms import PLATFORMS

        self.ui.say("\n3. Who may talk to it in direct messages (groups: docs/access.md)")
        for number, (name, meaning) in enumerate(DM_POLICIES.items(), 1):
            self.ui.say(f"  {number}. {name}: {meaning}")
        names = list(DM_POLICIES)
        default_policy = str(current.value("dm_policy") or self.settings.dm_policy)
        listed = current.value("allowed_senders")
        ids = [
            str(sender).split(":", 1)[1]
            for sender in (listed if isinstance(listed, list) else [])
            if str(sender).startswith(f"{platform}:")
        ]
        while True:
            answer = self.ui.ask("DM policy", default_policy).lower()
            if answer.isdigit() and 1 <= int(answer) <= len(names):
                answer = names[int(answer) - 1]
            if answer not in DM_POLICIES:
                self.ui.say(f"{answer!r} is not one of {', '.join(names)}.")
                continue
            policy: DmPolicy = answer
            self.ui.say(f"People always allowed: {PLATFORMS[platform].ids}; commas between.")
            text = self.ui.ask("Allowed (- for nobody)", ", ".join(ids))
            try:
                senders = () if text == "-" else parse_senders(platform, text)
            except ClawbotError as exc:
                self.ui.say(str(exc))
                continue
            problem = access_problem(policy, senders)
            if problem is None:
                return policy, senders
            self.ui.say(f"Hold on: {problem}.")


PlatformOption = Annotated[
    str | None,
    typer.Option("--platform", "-p", help="telegram, discord or slack (asked when not given)"),
]
PolicyOption = Annotated[
    str | None,
    typer.Option("--dm-policy", help="pairing, allowlist, open or disabled"),
]
AllowOption = Annotated[
    list[str] | None,
    typer.Option("--allow", help="a person always allowed, by id on the platform (repeatable)"),
]
BatchOption = Annotated[
    bool,
    typer.Option(
        "--non-interactive",
        help="ask nothing: options above, keys and tokens from the environment or .env",
    ),
]


def onboard(
    model: ModelOption = None,
    home: HomeOption = None,
    platform: PlatformOption = None,
    dm_policy: PolicyOption = None,
    allow: AllowOption = None,
    non_interactive: BatchOption = False,
) -> None:
    """Set clawbot up: the model and its key, a platform, who may talk to it."""
    import asyncio
    import os
    from pathlib import Path

    from dotenv import dotenv_values

    from clawbot.logs import setup_logging
    from clawbot.setup.home_files import overridden, read_home, write_answers
    from clawbot.setup.platforms import PLATFORM_NAMES

    shell = dict(os.environ)  # before load() adds the home's .env to it
    settings = load(None, home)
    folder = Path(".env")  # the current folder's, unless it is the home's own
    same = folder.resolve() == (settings.home / ".env").resolve()
    here = {} if same or not folder.is_file() else dotenv_values(folder)
    environment = {name: value for name, value in {**here, **shell}.items() if value}
    setup_logging("WARNING", settings.secret_values())  # the questions, not INFO lines
    if platform is not None and platform.lower() not in PLATFORM_NAMES:
        fail(f"--platform is one of {', '.join(PLATFORM_NAMES)}, not {platform!r}")
    try:
        current = read_home(settings.home)
        with asyncio.Runner() as runner:
            if non_interactive:
                answers = _from_options(settings, runner, model, platform, dm_policy, allow or [])
            else:
                answers = _asked(settings, runner, current, model, platform)
        written = write_answers(settings.home, answers)
        shadowed = overridden(answers, current, environment)
    except (KeyboardInterrupt, EOFError) as stop:
        print("\nStopped: nothing was written.", file=sys.stderr, flush=True)
        raise typer.Exit(130 if isinstance(stop, KeyboardInterrupt) else 1) from None
    except ClawbotError as exc:
        fail(str(exc))
    if shadowed:
        print(
            f"Note: {', '.join(shadowed)} set in the environment or ./.env will override "
            "what was written here; unset or change it there.",
            flush=True,
        )
    where = "" if home is None else f" --home {home}"
    print(
        f"\nWrote {written.env_file} (keys and tokens, readable by you alone) and "
        f"{written.toml_file}.\nStart the bot with: clawbot run{where}",
        flush=True,
    )


def _asked(
    settings: Settings,
    runner: asyncio.Runner,
    current: HomeSettings,
    model: str | None,
    platform: str | None,
) -> OnboardAnswers:
    from clawbot.setup.answers import OnboardAnswers

    ui = Terminal()
    ui.say(f"Setting clawbot up in {settings.home}. Nothing is written until the end.")
    wizard = Wizard(settings, runner, ui)
    chosen_model, key = wizard.model(model or settings.model)
    chosen, tokens = wizard.platform(platform.lower() if platform else None)  # type: ignore[arg-type]
    policy, senders = wizard.access(chosen, current)
    return OnboardAnswers(
        model=chosen_model,
        provider_key=key,
        platform=chosen,
        tokens=tokens,
        dm_policy=policy,
        allowed_senders=senders,
    )


def _from_options(
    settings: Settings,
    runner: asyncio.Runner,
    model: str | None,
    platform: str | None,
    dm_policy: str | None,
    allow: list[str],
) -> OnboardAnswers:
    """The answers from options, the environment and the settings files, each checked as
    the questions would be; the first problem stops the run."""
    import os

    from pydantic import SecretStr

    from clawbot.setup.answers import DM_POLICIES, OnboardAnswers, access_problem, parse_senders
    from clawbot.setup.model_check import check_model, current_key, key_names
    from clawbot.setup.platforms import PLATFORMS, check_platform, token_problem

    if platform is None:
        fail("--non-interactive needs --platform (telegram, discord or slack)")
    chosen: PlatformName = platform.lower()  # type: ignore[assignment]
    chosen_model = model or settings.model
    names = key_names(chosen_model)
    held = current_key(names)
    if names and held is None:
        fail(f"{chosen_model} needs a key: set {' or '.join(names)} in the environment or .env")
    key = (held, SecretStr(os.environ[held])) if held else None
    runner.run(check_model(chosen_model, key))
    tokens: dict[str, SecretStr] = {}
    for field in PLATFORMS[chosen].tokens:
        value: SecretStr | None = getattr(settings, field.setting)
        problem = token_problem(field, value.get_secret_value() if value else "")
        if problem or value is None:
            fail(f"{problem}: set {field.env} in the environment or .env")
        tokens[field.setting] = value
    runner.run(check_platform(chosen, tokens, settings))
    policy = (dm_policy or settings.dm_policy).lower()
    if policy not in DM_POLICIES:
        fail(f"--dm-policy is one of {', '.join(DM_POLICIES)}, not {policy!r}")
    senders = parse_senders(chosen, " ".join(allow))
    problem = access_problem(policy, senders)
    if problem:
        fail(problem)
    return OnboardAnswers(
        model=chosen_model,
        provider_key=key,
        platform=chosen,
        tokens=tokens,
        dm_policy=policy,
        allowed_senders=senders,
    )
