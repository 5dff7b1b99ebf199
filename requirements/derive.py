"""Write the two files derived from requirements/lock.txt, or check them (--check):
lock-cpu.txt, the lock less torch, torchvision and the CUDA packages only they pull in (the
CPU-only route installs PyTorch's CPU build of the same versions first), and pip.txt, the
lock's pip entry (installed before the rest, so that the lock is read by its own pip).

    python requirements/derive.py            # after regenerating lock.txt
    python requirements/derive.py --check    # exit 1 naming a file that disagrees
"""

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# torch's own CUDA build: the CPU wheel needs none of these
CUDA_STACK = re.compile(r"(torch|torchvision|triton|nvidia-.*|cuda-.*)")


def entries(text: str) -> list[tuple[str, str]]:
    """(name, the entry's lines) for each pinned entry of a hashed requirements file."""
    out: list[tuple[str, str]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("#") or not line.strip():
            continue
        if line[0].isspace():
            name, block = out[-1]
            out[-1] = (name, block + line)
        else:
            out.append((line.split("==", 1)[0].strip(), line))
    return out


def derived() -> dict[str, str]:
    lock = entries((HERE / "lock.txt").read_text())
    cpu = "".join(block for name, block in lock if not CUDA_STACK.fullmatch(name))
    pip = "".join(block for name, block in lock if name == "pip")
    return {
        "lock-cpu.txt": ("# requirements/lock.txt less torch, torchvision and their CUDA "
                         "packages (the README's\n# CPU-only route); written by "
                         "requirements/derive.py, never by hand\n" + cpu),
        "pip.txt": ("# requirements/lock.txt's pip, installed first; written by "
                    "requirements/derive.py\n" + pip),
    }


def main(argv: list[str]) -> int:
    stale = []
    for name, text in derived().items():
        path = HERE / name
        if "--check" in argv:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"requirements/{', '.join(stale)} disagree with requirements/lock.txt: run "
              f"python requirements/derive.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
