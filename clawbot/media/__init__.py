"""Images, voice and files people send, made into what the model can use: images shown to
a vision model as content blocks, voice notes and audio transcribed, documents saved into
the agent's workspace and named to it. The transcript keeps references, never bytes.

It sits above the runtime (it is a turn plug-in) and never imports the scheduler, the
router or an adapter: files are fetched through the channel interface the outbox holds.
"""

__all__ = ["kinds", "names", "plugin"]
