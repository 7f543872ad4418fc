"""Checkpoint tensors transformers cuts into several parameters on load (a ``WeightConverter``
whose only operation is ``Chunk``), from the backlog: HRM saves its attention's gate, q, k and v as
one ``attn.gqkv_proj.weight`` and its MLP's gate and up as one ``mlp.gate_up_proj.weight``.

These end-to-end tests use transformers' default Llama with HRM's two kinds of converter
registered for it (HRM itself: test_stack_recurrence.py): its checkpoint
then keeps ``mlp.gate_up_proj.weight`` and ``attn.qkv.weight``, as ``save_pretrained`` writes
them. The analysis reads the cuts and proves them by value; generated mobius code passes parity
with zero edits and fails it with the cut left out or its order swapped; AutoModel refuses the
cut by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from onboard.errors import UnsupportedFeatureError
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.spec import WeightSplit
from tests.targets.mobius.sabotage import parity_with

MLP = WeightSplit("mlp.gate_up_proj.weight", ("mlp.gate_proj.weight", "mlp.up_proj.weight"))
QKV = WeightSplit(
    "attn.qkv.weight",
    ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"),
)
CUT = "        state_dict = _split_fused_weights(state_dict)\n"
ORDER = '"self_attn.q_proj.weight",\n        "self_attn.k_proj.weight",'
SWAPPED = '"self_attn.k_proj.weight",\n        "self_attn.q_proj.weight",'


@pytest.fixture(scope="module")
def fused_llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Default Llama (MHA, so q, k and v are equal chunks) whose checkpoint fuses as HRM's."""
    from transformers import conversion_mapping
    from transformers.core_model_loading import Chunk, WeightConverter

    from tests.new_types import default_config_dir

    converters = [
        WeightConverter(
            source_patterns=split.fused,
            target_patterns=list(split.parts),
            operations=[Chunk(dim=0)],
        )
        for split in (MLP, QKV)
    ]
    conversion_mapping.register_checkpoint_conversion_mapping("LlamaForCausalLM", converters)
    try:
        yield default_config_dir("llama", tmp_path_factory.mktemp("hub"))
    finally:
        conversion_mapping._checkpoint_conversion_mapping_cache.pop("LlamaForCausalLM")
        conversion_mapping.USER_REGISTERED_MAPPINGS.discard("LlamaForCausalLM")


def _analyse(folder: Path):
    from onboard.analysis import analyse
    from onboard.source import load_source

    return analyse(load_source(str(folder)))


def test_the_cuts_are_read_in_order_and_proved(fused_llama: Path) -> None:
    """The saved names are read as transformers cuts them, each cut with its converter."""
    analysis = _analyse(fused_llama)
    assert analysis.spec.unresolved == ()
    splits = analysis.spec.weights.splits
    assert [(s.fused, s.parts, s.dim) for s in splits] == [
        (s.fused, s.parts, 0) for s in (MLP, QKV)
    ]
    assert all(s.where.startswith("conversion_mapping.py") for s in splits)
    names = {name for name, _ in analysis.spec.weights.tensors}
    assert "model.layers.0.self_attn.q_proj.weight" in names
    assert not any("attn.qkv" in n or "gate_up_proj" in n for n in names)


def test_a_cut_read_in_the_wrong_order_is_refused(
    fused_llama: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proof by value: parts read swapped fill other parameters than transformers', and
    the model is refused before anything is generated."""
    from onboard.analysis import load_splits

    read = load_splits._chunk_split

    def swapped(converter, where):
        split = read(converter, where)
        return split and WeightSplit(split.fused, split.parts[::-1], split.dim, split.where)

    monkeypatch.setattr(load_splits, "_chunk_split", swapped)
    with pytest.raises(UnsupportedFeatureError, match=r"cut on load .* by Chunk at conversion"):
        _analyse(fused_llama)


def test_automodel_refuses_the_cut_by_name(fused_llama: Path) -> None:
    from onboard.targets.automodel.propose import blockers

    found = [b for b in blockers(_analyse(fused_llama).spec) if "cut into" in b]
    assert len(found) == 2 and "attn.qkv.weight cut into self_attn.q_proj.weight" in found[1]


@pytest.mark.slow
def test_generated_mobius_cuts_the_tensors_and_sabotage_fails(
    fused_llama: Path, tmp_path: Path
) -> None:
    """Zero edits: parity passes. Without the cut the fused tensors fill nothing; with q and k
    swapped in the cut every layer's attention is wrong."""
    result = onboard_new(NewOptions(model=str(fused_llama), out=tmp_path, treat_as_new=True))
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert CUT in text and ORDER in text

    swapped = parity_with(result, ORDER, SWAPPED)
    assert not swapped.passed
    assert any(c.status is Status.FAIL and c.name == "prefill" for c in swapped.checks)

    module.write_text(text)
    left_out = parity_with(result, CUT, "")
    assert not left_out.passed
