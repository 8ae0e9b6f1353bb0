"""Compiler internals of the DSL: IR, passes (fusion, sync, replication) and JSON emission."""
