"""Scheduled tasks and the heartbeat: prompts that run on their own time, as TurnJobs in
the ``cron`` lane of a session (docs/schedules.md).

``records`` (what the store keeps) sits below the store; ``when`` reads a time people write
into a trigger (cron expressions through croniter); ``book`` creates, lists and cancels a
session's tasks; ``runner`` is the turn plug-in whose loop fires due tasks; ``heartbeat``
runs an agent's ``HEARTBEAT.md`` checklist; ``tools`` are the model's schedule tools.

It never imports ``commands``, ``routing``, ``app``, ``cli`` or ``adapters`` (``/schedule``
and ``clawbot schedule`` call it); ``records`` imports only the foundation.
"""

__all__ = ["book", "heartbeat", "records", "runner", "tools", "when"]
