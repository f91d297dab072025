"""The Slack channel."""
