"""Channel adapters: one package per platform (``telegram``, ``discord``, ``slack``) and the
console (``console``), each registered under the ``clawbot.adapters`` entry point. They
import only clawbot's foundation and ``clawbot.channels``; clawbot never imports them."""
