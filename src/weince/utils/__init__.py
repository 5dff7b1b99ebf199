"""Shared helpers: provenance of results, atomic file writes, checkpoints, seeding."""
from weince.utils.provenance import provenance, config_hash, write_json, read_json

__all__ = ["provenance", "config_hash", "write_json", "read_json"]
