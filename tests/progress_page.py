"""Reading `weince progress`'s page in the end-to-end tests (tests/workflow/test_progress_run.py,
tests/cluster/test_cluster.py): the overall row's counts by column name, and one failed job's
entry whole (its reason is wrapped onto indented lines)."""

from __future__ import annotations

from itertools import takewhile

from weince.cost.progress import STATES


def all_counts(text: str) -> dict[str, int]:
    """The table's ``all`` row: planned and each state's count, by the table's column names."""
    row = next(line for line in text.splitlines() if line.startswith("all "))
    names = ["planned", *STATES]
    return dict(zip(names, (int(x) for x in row.split()[1:1 + len(names)]), strict=True))


def failed_entry(text: str, job: str) -> str | None:
    """The failed-jobs entry of ``job`` (``- <job>: ...``) as one line, its wrapped lines
    joined; None when the page does not name it."""
    lines = text.splitlines()
    at = next((k for k, line in enumerate(lines) if line.startswith(f"- {job}: ")), None)
    if at is None:
        return None
    return " ".join([lines[at], *(line.strip() for line in takewhile(
        lambda line: line.startswith(" "), lines[at + 1:]))])
