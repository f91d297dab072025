"""Scheduling: turns as persisted jobs in lanes."""
