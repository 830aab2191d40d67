"""Discord: ``payloads`` (pure parsing of gateway, REST and interaction payloads into
normalised events, and replies into message bodies) and ``client`` (the thin
discord.py shell that connects, feeds the chat service and posts replies)."""
