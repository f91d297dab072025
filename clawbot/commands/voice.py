"""``/voice on|off``: this conversation's replies also read aloud as voice notes (see
``clawbot.runtime.speech``), kept with the session so the choice outlives a restart."""

from __future__ import annotations

from clawbot.commands.registry import CommandContext, CommandRegistry
from clawbot.runtime.speech import VOICE_META, speaks
from clawbot.settings import Settings

NOT_SET_UP = (
    "Voice notes are not set up here: whoever runs the bot sets CLAWBOT_TTS_MODEL "
    "(a speech model, e.g. openai/tts-1) first."
)


def register_voice_commands(registry: CommandRegistry, settings: Settings) -> None:
    @registry.command("voice", "also send each reply as a voice note, or stop it", usage="[on|off]")
    async def _voice(ctx: CommandContext) -> str:
        wanted = ctx.args.strip().lower()
        if wanted not in ("", "on", "off"):
            return "Usage: /voice on, /voice off, or /voice to see which it is."
        if wanted == "":
            state = "on: each reply also comes as a voice note" if speaks(ctx.session) else "off"
            return f"Voice notes are {state}." + ("" if settings.tts_model else f" {NOT_SET_UP}")
        if wanted == "on" and settings.tts_model is None:
            return NOT_SET_UP
        meta = {key: value for key, value in ctx.session.meta.items() if key != VOICE_META}
        if wanted == "on":
            meta[VOICE_META] = True
        await ctx.update_session(meta=meta)
        if wanted == "on":
            return "Voice notes are on: each reply also comes read aloud, after its text."
        return "Voice notes are off: replies come as text only."
