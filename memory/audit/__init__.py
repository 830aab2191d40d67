"""The audit: what the memory holds about a conversation and why, what an answer drew on,
what was forgotten, and what forgetting one message would do.

Every query here is scoped to one conversation (each statement filters by its
``conversation_id``) and reads only what survives: a deleted message's text is gone from
the store, and these queries never reach for it; the deletion log holds ids and counts.
Who may ask is decided by the door (memory/door.py, memory/access.py), before any query runs.
"""
