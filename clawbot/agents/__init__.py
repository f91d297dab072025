"""Agents: profiles, their files, the registry, models, skills, workspace."""
