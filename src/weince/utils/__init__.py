"""Shared helpers: result files (written with provenance, read with schema checks), atomic
file writes, checkpoints, seeding."""
from weince.utils.provenance import provenance, config_hash
from weince.utils.results import write_json, read_json

__all__ = ["provenance", "config_hash", "write_json", "read_json"]
