"""Setting clawbot up: what a first run asks, checks and writes, for ``clawbot onboard``
in the terminal and the console's first page alike.

``answers`` is what an operator chose (``OnboardAnswers``) and who may talk to the bot;
``platforms`` what each platform needs, the token checked against the platform itself
(Telegram's ``getMe``, Discord's ``/users/@me``, Slack's ``auth.test``) and the Slack app
manifest; ``model_check`` the model's key checked with one short call through the runtime's
own litellm client; ``home_files`` the home's ``.env`` and ``clawbot.toml`` edited in place
(comments and other lines kept, a key never written twice) and replaced atomically.

The last of the stages: it imports the foundation and ``runtime``'s model client. It never
imports the store, ``app``, ``cli`` or ``adapters``.
"""

__all__ = ["answers", "home_files", "model_check", "platforms"]
