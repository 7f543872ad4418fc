"""generated_examples/ must be exactly what the generator produces now (``make examples``)."""

from __future__ import annotations

from pathlib import Path

from onboard.examples import EXAMPLES, regenerate

COMMITTED = Path(__file__).parent.parent / "generated_examples"


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_committed_examples_match_the_generator(tmp_path: Path) -> None:
    regenerate(tmp_path, parity=False)
    for example in EXAMPLES:
        fresh = _files(tmp_path / example.folder)
        committed = _files(COMMITTED / example.folder)
        assert sorted(fresh) == sorted(committed), "file list drifted: run `make examples`"
        for name, content in fresh.items():
            assert committed[name] == content, (
                f"{example.folder}/{name} drifted: run `make examples`"
            )
