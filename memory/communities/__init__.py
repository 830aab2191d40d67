"""Communities: label-propagation clusters of entities with summaries (memory/communities/run.py)."""
