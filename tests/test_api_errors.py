"""The Python API's errors: every failure is a CrossoverError of one kind (input, does-not-fit,
file) naming the offending parameter where there is one; pydantic's ValidationError never leaks
(invariant 6, docs/architecture.md)."""

from __future__ import annotations

import pytest

import crossover
from crossover.errors import CrossoverError, DoesNotFitError, FileError, InputError, from_validation


@pytest.mark.parametrize("kwargs,parameter", [
    (dict(transition="bogus"), "transition"),
    (dict(model="no-such-model"), "model"),
    (dict(hardware="no-such-gpu"), "hardware"),
    (dict(engine="no-such-engine"), "engine"),
    (dict(weight_dtype="fp7"), None),
])
def test_bad_values_are_input_errors_never_pydantic(kwargs, parameter):
    import pydantic

    with pytest.raises(InputError) as info:
        crossover.scenario(**kwargs)
    assert not isinstance(info.value, pydantic.ValidationError)
    assert info.value.parameter == parameter and "\n" not in str(info.value)


def test_a_model_too_large_for_the_hardware_does_not_fit():
    with pytest.raises(DoesNotFitError, match="does not fit on 1 x h100-sxm"):
        crossover.predict(crossover.scenario(model="llama-3.1-405b", hardware="h100-sxm", tp=1))


def test_unreadable_files_are_file_errors(tmp_path):
    with pytest.raises(FileError, match="no such file"):
        crossover.measured(files=[str(tmp_path / "missing.csv")])
    bad = tmp_path / "hw.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(FileError, match="malformed YAML"):
        crossover.scenario(hardware=str(bad))


def test_every_kind_is_a_crossover_error_and_a_value_error():
    for cls in (InputError, DoesNotFitError, FileError):
        e = cls("a\n  message", parameter="k")
        assert isinstance(e, CrossoverError) and isinstance(e, ValueError)
        assert str(e) == "a message" and e.parameter == "k"


def test_from_validation_is_the_clis_line():
    from crossover.specs import Efficiency

    import pydantic

    with pytest.raises(pydantic.ValidationError) as info:
        Efficiency(transition="bogus")
    e = from_validation(info.value)
    assert str(e) == "transition: Input should be 'smooth', 'max' or 'sum'" and e.parameter == "transition"


def test_an_unknown_scenario_option_is_one_line_naming_it():
    with pytest.raises(InputError, match="scenario: unknown option 'modle' \\(known: model, hardware, acceptance") as info:
        crossover.scenario(modle="llama-3.1-8b")
    assert info.value.parameter == "modle"
    with pytest.raises(InputError, match="unknown option 'kk'"):
        crossover.predict(kk=3)


@pytest.mark.parametrize("batches", [["eight"], [[1, 2], [3, 4]], [], [0, 8], [float("nan")], [1e12]])
def test_batches_that_are_no_load_are_one_line_errors(batches):
    """`crossover.predict(batches=...)`: text, a nested list or an empty one is an InputError naming
    `batches`; a number that is no load (<= 0, NaN, past what the KV cache could ever hold) one line."""
    with pytest.raises(CrossoverError) as err:
        crossover.predict(batches=batches)
    assert "\n" not in str(err.value)
    if not batches or not isinstance(batches[0], (int, float)):
        assert isinstance(err.value, InputError) and err.value.parameter == "batches"
