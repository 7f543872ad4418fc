"""onboard new --repo: edits a mobius checkout in place, idempotently, all or nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from onboard.errors import ConflictError, TargetRepoError
from onboard.pipeline import NewOptions, onboard_new
from onboard.render import Action
from tests.fake_mobius import tree_snapshot
from tests.hub_cache import fixture_config
from tests.new_types import default_config_dir


def _new(model: Path, repo: Path, **options):
    return onboard_new(NewOptions(model=str(model), repo=repo, parity=False, **options))


@pytest.fixture
def vaultgemma(tmp_path: Path) -> Path:
    return default_config_dir("vaultgemma", tmp_path / "models")


def test_new_model_type_is_registered_in_the_checkout(mobius_repo: Path, vaultgemma: Path) -> None:
    result = _new(vaultgemma, mobius_repo)
    actions = {f.path: f.action for f in result.rendered.files}
    assert actions == {
        "src/mobius/models/vaultgemma.py": Action.CREATE,
        "testdata/cases/causal-lm/vaultgemma.yaml": Action.CREATE,
        "src/mobius/models/__init__.py": Action.UPDATE,
        "src/mobius/_configs/_base.py": Action.UPDATE,
        "src/mobius/_configs/__init__.py": Action.UPDATE,
        "src/mobius/_registry.py": Action.UPDATE,
        "tests/_test_configs.py": Action.UPDATE,
    }
    registry = (mobius_repo / "src/mobius/_registry.py").read_text()
    assert '"vaultgemma": ModelRegistration(VaultGemmaCausalLMModel),' in registry
    init = (mobius_repo / "src/mobius/models/__init__.py").read_text()
    assert "from mobius.models.vaultgemma import VaultGemmaCausalLMModel" in init
    assert '"VaultGemmaCausalLMModel",' in init
    configs = (mobius_repo / "tests/_test_configs.py").read_text()
    assert (
        '    (\n        "vaultgemma",\n        {\n            "_config_cls": VaultGemmaConfig,\n'
        in configs
    )
    assert "from mobius._configs import VaultGemmaConfig, VisionConfig" in configs
    assert "class VaultGemmaConfig(" in (mobius_repo / "src/mobius/_configs/_base.py").read_text()
    # The edited checkout imports and resolves the new model_type to the generated class.
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import mobius; "
            "from mobius._configs import VaultGemmaConfig as C; "
            "print(mobius.registry.get('vaultgemma').__name__, mobius.__file__, C.__module__)",
            str(mobius_repo / "src"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split()[0] == "VaultGemmaCausalLMModel"
    assert probe.stdout.split()[1].startswith(str(mobius_repo))
    assert probe.stdout.split()[2] == "mobius._configs._base"


def test_second_run_changes_nothing(mobius_repo: Path, vaultgemma: Path) -> None:
    _new(vaultgemma, mobius_repo)
    before = {p: p.stat().st_mtime_ns for p in mobius_repo.rglob("*") if p.is_file()}
    again = _new(vaultgemma, mobius_repo)
    assert {f.action for f in again.rendered.all_files} == {Action.IDENTICAL}
    after = {p: p.stat().st_mtime_ns for p in mobius_repo.rglob("*") if p.is_file()}
    assert before == after


def test_treat_as_new_rerun_proposes_against_the_library_it_first_saw(mobius_repo: Path) -> None:
    """mobius registers Mixtral on the shared MoECausalLMModel, which --treat-as-new hides
    with every key it serves; the first run re-points ``mixtral`` to the generated class, so a
    second run must hide what the first saw (the answers file records it), not less."""
    mixtral = fixture_config("mistralai/Mixtral-8x7B-v0.1").parent
    first = _new(mixtral, mobius_repo, treat_as_new=True)
    assert first.proposal.chosen.variant.class_name != "MoECausalLMModel"
    again = _new(mixtral, mobius_repo, treat_as_new=True)
    assert again.proposal.chosen.variant == first.proposal.chosen.variant
    assert {f.action for f in again.rendered.all_files} == {Action.IDENTICAL}
    answers = json.loads((mobius_repo / ".onboard/mixtral.json").read_text())
    assert answers["hidden"]["mixtral"] == "MoECausalLMModel"


def test_dry_run_writes_nothing_and_shows_diffs(mobius_repo: Path, vaultgemma: Path) -> None:
    before = tree_snapshot(mobius_repo)
    result = _new(vaultgemma, mobius_repo, dry_run=True)
    assert tree_snapshot(mobius_repo) == before
    diffs = {f.path: f.diff for f in result.rendered.files}
    assert (
        '+    "vaultgemma": ModelRegistration(VaultGemmaCausalLMModel),'
        in diffs["src/mobius/_registry.py"]
    )


def test_hand_edited_file_is_a_conflict_unless_forced(mobius_repo: Path, vaultgemma: Path) -> None:
    _new(vaultgemma, mobius_repo)
    module = mobius_repo / "src/mobius/models/vaultgemma.py"
    module.write_text(module.read_text() + "\n# my fix\n")
    before = tree_snapshot(mobius_repo)
    with pytest.raises(ConflictError, match=r"vaultgemma\.py"):
        _new(vaultgemma, mobius_repo)
    assert tree_snapshot(mobius_repo) == before
    forced = _new(vaultgemma, mobius_repo, force=True)
    assert {f.path: f.action for f in forced.rendered.files}[
        "src/mobius/models/vaultgemma.py"
    ] is Action.FORCED
    assert "# my fix" not in module.read_text()


def test_broken_registry_leaves_the_checkout_untouched(mobius_repo: Path, vaultgemma: Path) -> None:
    registry = mobius_repo / "src/mobius/_registry.py"
    registry.write_text(registry.read_text() + "\ndef broken(:\n")
    before = tree_snapshot(mobius_repo)
    with pytest.raises(TargetRepoError, match="does not parse"):
        _new(vaultgemma, mobius_repo)
    assert tree_snapshot(mobius_repo) == before


def test_out_folder_holds_a_patch_against_the_installed_mobius(
    tmp_path: Path, vaultgemma: Path
) -> None:
    out = tmp_path / "out"
    result = onboard_new(NewOptions(model=str(vaultgemma), out=out, parity=False))
    assert result.root == out.resolve()
    patch = (out / "onboard.patch").read_text()
    assert "+++ b/src/mobius/_registry.py" in patch
    assert '+    "vaultgemma": ModelRegistration(VaultGemmaCausalLMModel),' in patch
    # the entry sits indented inside the numbered step's code block
    assert (
        '   (\n       "vaultgemma",\n       {\n           "_config_cls": VaultGemmaConfig,'
        in (out / "ONBOARD.md").read_text()
    )
