"""Slack: Events API (HTTP or Socket Mode) and Web API through slack-bolt and slack_sdk."""
