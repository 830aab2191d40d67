"""Participants' rights: opting out, retention windows, forgetting a person."""
