"""File names of a norms run (a torch-free module, so the report imports no torch)."""

RESULT_FILE = "norms.json"
PROBES_FILE = "norms_probes.npz"
