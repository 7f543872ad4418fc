"""Fuyu has no vision tower (one linear over flattened patches), which the generated VLM (HF's
tower and projector around the text model, fed pixel_values) cannot hold: refused by name at
get_image_features, with one line and its own exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.new_types import default_config_dir
from tests.test_exit_codes import run_main


def test_fuyu_is_refused_by_name_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from onboard.errors import ExitCode

    source = default_config_dir("fuyu", tmp_path / "hub")
    argv = ["new", str(source), "--target", "automodel", "--treat-as-new"]
    code, _, err = run_main([*argv, "--out", str(tmp_path / "out")], capsys)
    assert code == ExitCode.UNSUPPORTED
    assert "Traceback" not in err
    (reason,) = [line for line in err.splitlines() if line.startswith("  - ")]
    assert reason.startswith(
        "  - no vision tower: images enter as flattened image_patches through one linear "
        "(vision_embed_tokens, modeling_fuyu.py:"
    )
    assert "cannot express 1 feature(s) of fuyu" in err
    assert not (tmp_path / "out").exists()
