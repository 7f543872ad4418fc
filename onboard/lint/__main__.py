"""``python -m onboard.lint``: the same as ``onboard check``."""

from __future__ import annotations

from onboard.lint.cli import main

if __name__ == "__main__":
    main()
