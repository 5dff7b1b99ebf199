"""Log redirection for the rules' scripts.

    from weince.pipeline.logs import log_to
    with log_to(snakemake.log[0]):
        ...
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Iterator

__all__ = ["log_to"]


@contextlib.contextmanager
def log_to(path: str | os.PathLike | None) -> Iterator[None]:
    """Send stdout, stderr and ``logging`` of a rule's script to its log file."""
    if not path:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", buffering=1) as fh:
        handler = logging.StreamHandler(fh)
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        old_out, old_err = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = fh
        try:
            yield
        except SystemExit as e:   # a deliberate exit (e.g. SIGTERM: checkpoint written)
            print(f"exit {e.code}: {e}", file=fh)
            raise
        except BaseException:
            traceback.print_exc(file=fh)  # the log names the error; snakemake shows the log
            raise
        finally:
            sys.stdout, sys.stderr = old_out, old_err
            root.removeHandler(handler)
