"""Results bundles for reviewers: ``weince bundle`` packs one profile's result files,
reports, configs and environment with a SHA-256 manifest; ``weince verify`` checks a bundle
and rebuilds its tables with the installed code (offline, no GPU, no torch).

    from weince.bundle import make_bundle, verify_bundle
    make_bundle("smoke", "smoke.tar.gz")
    print(verify_bundle("smoke.tar.gz").render())
"""

from weince.bundle._archive import DEFAULT_MAX_BYTES, DEFAULT_MAX_MANIFEST_BYTES, parse_size
from weince.bundle.make import make_bundle, rebuild_command
from weince.bundle.verify import VerifyResult, verify_bundle

__all__ = ["make_bundle", "verify_bundle", "VerifyResult", "rebuild_command",
           "DEFAULT_MAX_BYTES", "DEFAULT_MAX_MANIFEST_BYTES", "parse_size"]
