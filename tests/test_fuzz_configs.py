"""Input hardening as a property (issue 20): whatever a mutated bundled config holds, ``onboard
new`` and ``onboard inspect`` end with a documented exit code that is not internal_error, an error
is one line on stderr with its reason, and a failed run writes nothing (``tests/fuzz_configs.py``).

The default run draws a few hundred cases, derandomized so CI sees the same ones every time;
``ONBOARD_FUZZ_EXAMPLES`` changes how many, ``benchmarks/fuzz_configs.py`` runs ten thousand.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from hypothesis import HealthCheck, given, settings

from onboard import json_output
from onboard.errors import ExitCode
from tests.fuzz_configs import Case, Outcome, cases, problems, run_case
from tests.time_limit import TimeLimitExceeded, time_limit

FUZZ = settings(
    max_examples=int(os.environ.get("ONBOARD_FUZZ_EXAMPLES", "200")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(case=cases())
def test_a_mutated_config_ends_in_a_documented_code_and_one_line(case: Case) -> None:
    outcome = run_case(case)
    assert problems(outcome) == [], case.describe()


def _case(bundled: str, *edits: tuple, command: str = "inspect", as_json: bool = False) -> Case:
    return Case(bundled, edits, "none", command, "mobius", True, as_json)


def _error(outcome: Outcome) -> str:
    assert problems(outcome) == [], outcome.stderr
    return outcome.stderr.strip()


# Each config the fuzz found a bug with, now one line that names what is wrong
def test_architectures_that_are_not_class_names_are_bad_input() -> None:
    for value in (-2.5, {"0": "X"}, ["Qwen3ForCausalLM", 3], ["not a class"]):
        outcome = run_case(_case("Qwen/Qwen3-0.6B", ("replace", ("architectures",), value)))
        assert outcome.code == ExitCode.BAD_INPUT
        assert "architectures must be a list of class names" in _error(outcome)


def test_an_auto_map_that_is_not_an_object_is_bad_input() -> None:
    edit = ("add", ("auto_map",), float("-inf"))
    outcome = run_case(_case("mistralai/Mistral-7B-v0.1", edit, command="new"))
    assert outcome.code == ExitCode.BAD_INPUT
    assert "auto_map must be an object, got -inf" in _error(outcome)


def test_sub_configs_under_a_text_model_type_are_bad_input() -> None:
    edit = ("replace", ("model_type",), "qwen3")
    outcome = run_case(_case("llava-hf/llava-1.5-7b-hf", edit))
    assert outcome.code == ExitCode.BAD_INPUT
    assert "which Qwen3Config does not know" in _error(outcome)


def test_json_output_of_an_infinite_value_is_strict_json() -> None:
    edit = ("replace", ("rope_theta",), float("inf"))
    outcome = run_case(_case("Qwen/Qwen3-0.6B", edit, as_json=True))
    assert problems(outcome) == [], outcome.stdout[-300:]
    assert '"theta": "Infinity"' in outcome.stdout


def test_json_output_writes_no_bare_infinity(capsys) -> None:
    json_output.write({"a": [float("inf"), {"b": float("-inf")}], "c": 1.5})
    assert json.loads(capsys.readouterr().out) == {"a": ["Infinity", {"b": "-Infinity"}], "c": 1.5}


def test_a_sliding_window_that_is_not_a_number_is_bad_input() -> None:
    edit = ("add", ("text_config", "sliding_window"), [{"a": 1}])
    outcome = run_case(_case("llava-hf/llava-1.5-7b-hf", edit))
    assert outcome.code == ExitCode.BAD_INPUT
    assert "sliding_window must be a number of tokens" in _error(outcome)


def test_a_rope_parameter_holding_an_object_is_read() -> None:
    edit = ("add", ("rope_scaling", "extra"), [{}])
    outcome = run_case(_case("Qwen/Qwen2.5-VL-3B-Instruct", edit))
    assert outcome.code == ExitCode.OK, outcome.stderr


def test_a_qwen_vl_merger_wider_than_the_text_is_bad_input() -> None:
    edit = ("delete", ("vision_config", "out_hidden_size"), None)
    outcome = run_case(_case("Qwen/Qwen2.5-VL-3B-Instruct", edit))
    assert outcome.code == ExitCode.BAD_INPUT
    assert "out_hidden_size (3584) is not the text's hidden_size (2048)" in _error(outcome)


def test_a_sub_config_architectures_that_are_not_class_names_are_bad_input() -> None:
    edit = ("replace", ("text_config", "architectures"), {"a": 1})
    outcome = run_case(_case("llava-hf/llava-1.5-7b-hf", edit))
    assert outcome.code == ExitCode.BAD_INPUT
    assert "text_config.architectures must be a list of class names" in _error(outcome)


def test_a_negative_pad_token_id_means_none() -> None:
    """Old configs write -1; transformers will not save a tiny model holding it."""
    for bundled in ("Qwen/Qwen3-0.6B", "llava-hf/llava-1.5-7b-hf"):
        outcome = run_case(_case(bundled, ("add", ("pad_token_id",), -1)))
        assert outcome.code == ExitCode.OK, outcome.stderr


def test_a_qwen_vl_tower_size_of_zero_is_bad_input() -> None:
    edit = ("replace", ("vision_config", "temporal_patch_size"), 0)
    outcome = run_case(_case("Qwen/Qwen2.5-VL-3B-Instruct", edit))
    assert outcome.code == ExitCode.BAD_INPUT
    assert "vision_config.temporal_patch_size must be positive, got 0" in _error(outcome)


# The checks themselves: each broken promise is noticed
_CASE = _case("Qwen/Qwen3-0.6B", ("delete", ("hidden_size",), None), as_json=True)
_DOCUMENT = '{"exit_code": 2, "outcome": "bad_input"}'


def _outcome(code: int | None, stderr: str, written: tuple[str, ...] = (), stdout=_DOCUMENT):
    return Outcome(_CASE, code, stdout, stderr, written)


def test_the_checks_accept_one_error_line() -> None:
    assert problems(_outcome(2, "error: config.json has no hidden_size\n")) == []
    unsupported = '  - attention.kind: "x"\nerror: 1 unsupported feature\n'
    assert (
        problems(
            _outcome(
                4,
                unsupported,
                stdout=_DOCUMENT.replace("2", "4").replace("bad_input", "unsupported"),
            )
        )
        == []
    )


def test_the_checks_notice_every_broken_promise() -> None:
    line = "error: config.json has no hidden_size\n"
    broken = {
        "an escaped exception": _outcome(None, ""),
        "internal error": _outcome(8, "error: internal error (a bug in onboard): KeyError: 0\n"),
        "two lines": _outcome(2, "warning: something\n" + line),
        "wrapped": _outcome(2, "error: config.json has\nno hidden_size\n"),
        "no reason": _outcome(2, "error: bad\n"),
        "a dropped reason": _outcome(2, "error: the config does not build (ValueError)\n"),
        "a traceback": _outcome(2, "Traceback (most recent call last):\n" + line),
        "a write": _outcome(2, line, written=("out/x.py",)),
        "not JSON": _outcome(2, line, stdout='{"exit_code": Infinity}'),
        "another code in JSON": _outcome(2, line, stdout='{"exit_code": 0, "outcome": "ok"}'),
        "noise on success": _outcome(0, "warning: x\n", stdout='{"exit_code": 0, "outcome": "ok"}'),
    }
    for what, outcome in broken.items():
        assert problems(outcome), what


def test_a_run_sees_what_new_wrote_and_a_failed_new_writes_nothing() -> None:
    wrote = run_case(_case("Qwen/Qwen3-0.6B", command="new"))
    assert wrote.code == ExitCode.OK and "out/src/mobius/models/qwen3.py" in wrote.written
    refused = run_case(_case("Qwen/Qwen3-0.6B", ("replace", ("hidden_size",), -1), command="new"))
    assert refused.code == ExitCode.BAD_INPUT and refused.written == ()
    assert "hidden_size must be a positive integer" in _error(refused)


def test_a_case_that_runs_too_long_is_stopped() -> None:
    with pytest.raises(TimeLimitExceeded), time_limit(1):
        while True:
            time.sleep(0.05)
    with time_limit(1):  # and the alarm is off again afterwards
        pass
    time.sleep(1.2)
