"""With ``--trust-remote-code`` a checkpoint's own classes are built tiny and probed, as a
transformers model is: the InternLM2-layout fixture (its names, a dispatch table, a fused
grouped ``wqkv``, RoPE tables in ``__init__``, norm weights left as ``torch.empty``, a listed
``_tied_weights_keys``) is read, generated and proved, and the library's own class for its
model type runs against the checkpoint's code."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from onboard.errors import ExitCode
from tests.remote.runs import trusted_new
from tests.test_cli import _one_line_error, onboard


def _tied(folder: Path) -> Path:
    config = json.loads((folder / "config.json").read_text())
    config["tie_word_embeddings"] = True
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


@pytest.fixture
def internlm2(checkpoint):
    return checkpoint("internlm2-tiny")


@pytest.fixture
def trusted_analysis(internlm2):
    from onboard.analysis import analyse
    from onboard.remote_code import register_remote_classes
    from onboard.source import load_source

    source = load_source(str(internlm2))
    register_remote_classes(source.config, source.remote_files)
    return analyse(source, run_remote_code=True)


def test_probe_reads_what_the_names_hide(trusted_analysis) -> None:
    spec = trusted_analysis.spec
    attention = spec.text.attention
    assert (attention.fused_qkv, attention.fused_qkv_layout) == ("wqkv", "kv_grouped")
    assert (attention.num_heads, attention.num_kv_heads) == (4, 2)
    assert not attention.alibi  # a reading that cannot even run is never accepted
    (_kind, rope), *_ = spec.text.rope
    assert rope.rope_type == "default" and rope.theta == 1_000_000.0
    assert spec.unresolved == ()
    assert dict(spec.source.remote_files).keys() == {
        "configuration_internlm2.py",
        "modeling_internlm2.py",
    }
    cited = dict(spec.evidence)["text.attention.fused_qkv"]
    assert any(e.where.startswith("modeling_internlm2.py:") for e in cited)


def test_build_repairs_are_said(trusted_analysis) -> None:
    notes = " | ".join(trusted_analysis.build_notes)
    assert "leaves 5 parameter(s) uninitialised" in notes
    assert "model.norm.weight" in notes or "and 1 more" in notes
    assert "_tied_weights_keys is a list" in notes and "read as {}" in notes


def test_each_fused_layout_but_the_right_one_fails_the_spec_check(trusted_analysis) -> None:
    from onboard.analysis.layout import llama_view
    from onboard.analysis.spec_check import find_mismatches
    from onboard.hf_config import make_hf_config
    from onboard.tiny_model import build_tiny_model, perturb

    hf_config = make_hf_config(trusted_analysis.tiny.config)
    model = llama_view(perturb(build_tiny_model(hf_config))).model
    text = trusted_analysis.spec.text

    def reading(layout: str):
        attention = dataclasses.replace(text.attention, fused_qkv_layout=layout)
        return find_mismatches(dataclasses.replace(text, attention=attention), model, hf_config)

    assert reading("kv_grouped") == []
    assert reading("concatenated")  # runs, and differs
    assert reading("per_head") is None  # 6 heads x 3 rows do not fit: cannot even run


@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_generated_code_passes_with_zero_hand_edits(cli_env, internlm2, tmp_path, tie) -> None:
    folder = _tied(internlm2) if tie else internlm2
    parity = trusted_new(folder, tmp_path / "out", cli_env, "--treat-as-new")["parity"]
    assert parity["passed"]
    default = {c["name"]: c["status"] for c in parity["checks"] if c["provider"] == "default"}
    assert default["weights"] == default["prefill"] == default["decode"] == "pass"
    # The checkpoint's config.bias is a flag of the architecture: the code follows it, proved
    # on the tiny model with it flipped (21 tensors, the biases included); mobius' base config
    # reads config.bias itself, so the generated config does not restate it
    assert default["weights+"] == default["prefill+"] == "pass"
    model = (tmp_path / "out/src/mobius/models/internlm2.py").read_text()
    assert "attn_qkv_bias=" not in model


@pytest.mark.parametrize(
    ("tie", "bug", "evidence"),
    [
        (False, "M9", "output.weight (from output.weight) fills no parameter"),
        (True, "M10", "Boolean value of Tensor"),
    ],
    ids=["untied", "tied"],
)
@pytest.mark.slow
def test_the_library_class_runs_against_the_checkpoint_code(
    cli_env, internlm2, tmp_path, tie, bug, evidence
) -> None:
    """mobius registers internlm2: its class is checked against the checkpoint's own code, and
    each of its two conversion bugs is named; the generated class passes on the same
    checkpoints (test above), so the checkpoint is not what fails."""
    folder = _tied(internlm2) if tie else internlm2
    run = onboard("new", str(folder), "--trust-remote-code", "--json", env=cli_env, cwd=tmp_path)
    assert run.returncode == ExitCode.FAILED, run.stderr
    report = json.loads(run.stdout)
    assert report["proposal"]["already_supported"] == "InternLM2CausalLMModel"
    bugs = {b["id"]: b for b in report["parity"]["target_bugs"]}
    assert set(bugs) == {bug}
    assert evidence in bugs[bug]["evidence"]


def test_untrusted_registered_remote_type_does_not_run_the_code(
    cli_env, internlm2, tmp_path
) -> None:
    """Read as text, it is the registered type; parity would run its code: refused."""
    run = onboard("new", str(internlm2), env=cli_env, cwd=tmp_path)
    assert run.returncode == ExitCode.REFUSED, run.stderr
    assert "parity refused: internlm2 exists only as remote code" in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "onboarded").exists()


def test_checkpoint_code_that_fails_has_its_own_exit_code(cli_env, internlm2, tmp_path) -> None:
    modeling = internlm2 / "modeling_internlm2.py"
    source = modeling.read_text()
    anchor = "        self.act_fn = ACT2FN[config.hidden_act]\n"
    broken = anchor + '        raise ImportError("flash_attn is required (CUDA only)")\n'
    modeling.write_text(source.replace(anchor, broken))
    line = source[: source.index(anchor)].count("\n") + 2
    run = onboard(
        "new",
        str(internlm2),
        "--out",
        str(tmp_path / "out"),
        "--trust-remote-code",
        env=cli_env,
    )
    _one_line_error(
        run, ExitCode.REMOTE_CODE_FAILED, f"at modeling_internlm2.py:{line}: ImportError"
    )
    assert not (tmp_path / "out").exists()


def test_inspect_with_trust_probes_the_classes(cli_env, internlm2) -> None:
    run = onboard("inspect", str(internlm2), "--trust-remote-code", "--json", env=cli_env)
    assert run.returncode == 0, run.stderr
    features = json.loads(run.stdout)["features"]
    values = {f["name"]: f["value"] for f in features}
    assert values["attention.fused_qkv"] == "kv_grouped"


def test_features_cite_lines_that_still_hold() -> None:
    import re

    folder = Path(__file__).parents[1] / "fixtures" / "remote" / "internlm2-tiny"
    lines = (folder / "modeling_internlm2.py").read_text().splitlines()
    cited = re.findall(
        r"`modeling_internlm2\.py:(\d+)` `(.*)`$", (folder / "FEATURES.md").read_text(), re.M
    )
    assert len(cited) >= 15
    for number, code in cited:
        assert lines[int(number) - 1].strip() == code.strip(), number


@pytest.mark.slow
def test_hybrid_remote_code_passes_with_zero_hand_edits(cli_env, checkpoint, tmp_path) -> None:
    """tern: LFM2-style short convolutions beside attention, read by the same mixer readers."""
    report = trusted_new(checkpoint("tern-tiny"), tmp_path / "out", cli_env)
    assert report["parity"]["passed"]
    assert report["classification"]["kind"] == "hybrid"


def test_moe_experts_in_a_module_list_are_read(cli_env, checkpoint, tmp_path) -> None:
    """brook's experts are a ModuleList of w1/w3/w2 MLPs: read as stacked experts, their roles
    told by values and cited at the expert class's forward (tests/remote/test_expert_lists.py
    has the rest)."""
    run = onboard(
        "inspect", str(checkpoint("brook-tiny")), "--trust-remote-code", "--json", env=cli_env
    )
    assert run.returncode == 0, run.stderr
    spec = json.loads(run.stdout)["spec"]
    assert spec["unresolved"] == []
    moe = spec["text"]["moe"]
    assert moe["expert_leaves"] == [["gate", "w1"], ["up", "w3"], ["down", "w2"]]
    assert moe["shared"]["projections"] == moe["expert_leaves"]
    cited = [e for e in dict(spec["evidence"])["text.moe.experts"] if "read as stacked" in str(e)]
    assert cited and "modeling_brook.py:116" in str(cited[0])


@pytest.mark.parametrize(
    ("anchor", "inserted", "doing"),
    [
        (
            "        return self.w2(self.act_fn(self.w1(x)) * self.w3(x))\n",
            '        raise RuntimeError("flash_attn kernels need CUDA")\n',
            "running the tiny model",
        ),
        (
            "from transformers.activations import ACT2FN\n",
            "from transformers.utils import a_helper_transformers_removed\n",
            "importing modeling_internlm2.InternLM2ForCausalLM",
        ),
    ],
    ids=["forward", "import"],
)
def test_checkpoint_code_failing_later_names_its_line(
    cli_env, internlm2, tmp_path, anchor, inserted, doing
) -> None:
    modeling = internlm2 / "modeling_internlm2.py"
    source = modeling.read_text()
    modeling.write_text(source.replace(anchor, inserted + anchor, 1))
    line = source[: source.index(anchor)].count("\n") + 1
    run = onboard(
        "new", str(internlm2), "--out", str(tmp_path / "out"), "--trust-remote-code", env=cli_env
    )
    _one_line_error(
        run, ExitCode.REMOTE_CODE_FAILED, f"failed {doing} at modeling_internlm2.py:{line}"
    )


@pytest.mark.slow
def test_dynamic_rope_remote_code_gets_the_default_tables(cli_env, internlm2, tmp_path) -> None:
    """The checkpoint's own dynamic NTK RoPE (its code, not transformers') is read as dynamic,
    and the generated code does not inherit mobius' M8."""
    config = json.loads((internlm2 / "config.json").read_text())
    config["rope_scaling"] = {"type": "dynamic", "factor": 2.0}
    (internlm2 / "config.json").write_text(json.dumps(config, indent=2))
    report = trusted_new(internlm2, tmp_path / "out", cli_env, "--treat-as-new")
    ((_kind, rope),) = report["spec"]["text"]["rope"]
    assert rope["rope_type"] == "dynamic"
    assert report["parity"]["passed"]
    assert any("M8 not inherited" in note for note in report["parity"]["notes"])


def test_parity_command_on_a_registered_remote_type(cli_env, internlm2) -> None:
    refused = onboard("parity", str(internlm2), env=cli_env)
    _one_line_error(refused, ExitCode.REFUSED, "needs --trust-remote-code")
    run = onboard("parity", str(internlm2), "--trust-remote-code", "--json", env=cli_env)
    assert run.returncode == ExitCode.FAILED, run.stderr
    report = json.loads(run.stdout)
    assert [b["id"] for b in report["target_bugs"]] == ["M9"]


def test_trusted_inspect_of_the_hybrid_equals_its_feature_list(cli_env, checkpoint) -> None:
    """tern's FEATURES.md, feature by feature, as the probe of its own classes reads them."""
    run = onboard(
        "inspect", str(checkpoint("tern-tiny")), "--trust-remote-code", "--json", env=cli_env
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    values = {f["name"]: f["value"] for f in report["features"]}
    assert {k: values[k] for k in TERN_FEATURES} == TERN_FEATURES
    text = report["spec"]["text"]
    assert text["layer_types"] == ["short_conv", "full_attention", "short_conv", "full_attention"]
    conv = text["mixers"]["short_conv"]
    assert (conv["conv_kernel"], conv["order"], conv["bias"]) == (3, ["b", "c", "x"], False)
    ((_kind, rope),) = text["rope"]
    assert rope["theta"] == 10000.0
    assert report["spec"]["unresolved"] == []


TERN_FEATURES = {
    "layers.mixers": "short_conv",
    "attention.qk_norm": "per_head",
    "attention.qk_norm_after_rope": False,
    "attention.qkv_bias": False,
    "attention.o_bias": False,
    "mlp.kind": "gated",
    "mlp.activation": "silu",
    "norm.kind": "rms",
    "norm.placement": "pre",
    "positions": "rope",
    "rope.partial": False,
    "embeddings.tied": True,
}
