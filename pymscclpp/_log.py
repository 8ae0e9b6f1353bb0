"""Logging for pymscclpp through Python's logging, set by PYMSCCLPP_DEBUG.

PYMSCCLPP_DEBUG=LEVEL[:subsys,subsys] with LEVEL one of ERROR, WARN, INFO, DEBUG
(e.g. ``INFO`` or ``DEBUG:bootstrap,memory``); subsystems are child loggers
``pymscclpp.<subsys>``.
"""

from __future__ import annotations

import logging
import os

from . import config

_ROOT = "pymscclpp"
_LEVELS = {"ERROR": logging.ERROR, "WARN": logging.WARNING, "WARNING": logging.WARNING,
           "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": logging.DEBUG}  # config.LOG_LEVELS
_configured = False


def _configure() -> None:
    global _configured
    if _configured:
        return
    _configured = True
    spec = config.get("PYMSCCLPP_DEBUG")
    root = logging.getLogger(_ROOT)
    if spec is None:
        return
    level_name, wanted = spec
    level = _LEVELS[level_name]
    handler = logging.StreamHandler()
    rank = os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("RANK", "?")
    handler.setFormatter(logging.Formatter(f"[pymscclpp r{rank} %(name)s %(levelname)s] %(message)s"))
    if wanted:
        for sub in wanted:
            lg = logging.getLogger(f"{_ROOT}.{sub}")
            lg.setLevel(level)
            lg.addHandler(handler)
            lg.propagate = False
    else:
        root.setLevel(level)
        root.addHandler(handler)


def get_logger(subsystem: str) -> logging.Logger:
    """The logger of one subsystem (``bootstrap``, ``memory``, ``backend``, ...)."""
    _configure()
    return logging.getLogger(f"{_ROOT}.{subsystem}")
