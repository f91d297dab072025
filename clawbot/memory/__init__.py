"""Memories: texts agents keep under a key, searchable across conversations."""
