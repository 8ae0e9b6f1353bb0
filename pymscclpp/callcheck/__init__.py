"""The cross-rank call check, a layer below ``executor/`` and ``algos/``: every rank of a call compares the call's
fingerprint with its peers' before data moves, on the device (``device``; the shared area and check kernels in
``area``) or, for ranks on several hosts, over the bootstrap (``hosts``)."""
