"""The Discord channel."""
