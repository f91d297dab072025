"""Local stand-ins for the chat platforms: servers on 127.0.0.1 that speak each platform's wire
format, so the real client libraries run unmodified against them in tests."""
