"""Stashbird's memory core: episodes, the provenance graph, search and lifecycle rules.

Knows nothing of Slack or Discord; takes commands over plain data and owns the database.
"""
