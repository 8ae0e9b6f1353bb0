"""Host runtime: backend choice, bootstrap, registered memory, semaphores, connections."""

from . import backend  # noqa: F401  (must run before numba.cuda is imported)
