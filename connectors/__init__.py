"""Platform connectors (Slack, Discord): platform events in, core commands out."""
