"""Fault-injection suite: bounded waits, dead peers, bad inputs, soak, security, logging (see docs/reliability.md)."""
