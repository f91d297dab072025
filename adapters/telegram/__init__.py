"""The Telegram channel."""
