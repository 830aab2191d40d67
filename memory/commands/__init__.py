"""The memory core's commands beside memory/api.py, grouped by what they serve: the
audit (``audit``), background work and the operator's maintenance (``work``), the chat
service's durable inbox and the jobs' cursors (``inbox``). All run through the door
(memory/door.py); their public names are re-exported by ``memory``."""
