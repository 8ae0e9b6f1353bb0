"""The host proxy of PortChannels: a thread per GPU that pops device triggers and moves the bytes."""

from .service import ProxyService

__all__ = ["ProxyService"]
