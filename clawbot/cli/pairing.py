"""``clawbot pairing``: approve or reject people who asked to DM the bot."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clawbot.cli.common import HomeOption, fail, load, open_store

if TYPE_CHECKING:
    from clawbot.routing.pairing import PairingRequest


app = typer.Typer(
    help="Approve or reject people who asked to DM the bot (DM policy 'pairing').",
    no_args_is_help=True,
)


@app.command("list")
def pairing_list(home: HomeOption = None) -> None:
    """Show the pairing codes waiting for approval."""
    import asyncio

    from clawbot.messages import utcnow
    from clawbot.routing.access import Pairing

    async def pending() -> list[str]:
        store = await open_store(settings)
        try:
            now = utcnow()
            return [
                f"{r.channel:<9} {r.code}  {r.sender_name or '?'} ({r.sender_id}), "
                f"expires in {max(1, round((r.expires_at - now).total_seconds() / 60))} min"
                for r in await Pairing(store).pending()
            ]
        finally:
            await store.close()

    settings = load(home=home)
    lines = asyncio.run(pending())
    print("\n".join(lines) if lines else "No pairing codes are waiting.")


@app.command("approve")
def pairing_approve(
    channel: Annotated[str, typer.Argument(help="telegram, discord, slack ...")],
    code: Annotated[str, typer.Argument(help="the 8-character code the sender received")],
    home: HomeOption = None,
) -> None:
    """Let the sender of CODE talk to the agent; their next message reaches it."""
    request = _decide(channel, code, approve=True, home=home)
    print(
        f"Approved {request.sender_name or request.sender_id} ({request.sender_id}) on "
        f"{request.channel}. Their next message reaches the agent."
    )


@app.command("reject")
def pairing_reject(
    channel: Annotated[str, typer.Argument(help="telegram, discord, slack ...")],
    code: Annotated[str, typer.Argument(help="the 8-character code the sender received")],
    home: HomeOption = None,
) -> None:
    """Refuse the pairing request with CODE."""
    request = _decide(channel, code, approve=False, home=home)
    print(f"Rejected {request.sender_name or request.sender_id} on {request.channel}.")


def _decide(channel: str, code: str, *, approve: bool, home: Path | None) -> PairingRequest:
    import asyncio

    from clawbot.errors import ClawbotError
    from clawbot.routing.access import Pairing

    settings = load(home=home)

    async def decide() -> PairingRequest:
        store = await open_store(settings)
        try:
            pairing = Pairing(store)
            if approve:
                return await pairing.approve(channel, code)
            return await pairing.reject(channel, code)
        finally:
            await store.close()

    try:
        return asyncio.run(decide())
    except ClawbotError as exc:
        fail(str(exc), code=1)
