"""Configuration precedence: defaults < op_type < definition < request, recorded in ``origin``."""

import pytest
from fibserve.bench.config import CONFIG_ENV, EvalConfig, resolve_config
from fibserve.trace import Definition


def _definition(name="d", op_type="gemm"):
    return Definition.model_validate(
        {
            "name": name,
            "op_type": op_type,
            "axes": {"N": {"type": "var"}},
            "inputs": {"x": {"shape": ["N"], "dtype": "float32"}},
            "outputs": {"y": {"shape": ["N"], "dtype": "float32"}},
            "reference": "def run(x):\n    return x\n",
        }
    )


def test_packaged_defaults_match_the_design():
    config = resolve_config(None)
    assert (config.warmup, config.iterations, config.trials) == (10, 50, 3)
    assert config.required_matched_ratio == 1.0 and config.cold_l2 and config.validate_timed_outputs
    assert config.origin == {}


def test_each_layer_overrides_the_one_below(tmp_path, monkeypatch):
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    path = tmp_path / "eval.yaml"
    path.write_text(
        "defaults: {atol: 0.5, iterations: 7}\n"
        "op_type: {gemm: {atol: 0.25, rtol: 0.125}}\n"
        "definitions: {special: {atol: 0.0625, timeouts: {timing: 12}}}\n"
    )
    plain = resolve_config(_definition(op_type="rmsnorm"), config_path=path)
    assert (plain.atol, plain.iterations) == (0.5, 7)
    gemm = resolve_config(_definition(), config_path=path)
    assert (gemm.atol, gemm.rtol) == (0.25, 0.125)
    assert gemm.origin["atol"] == "op_type:gemm"
    special = resolve_config(_definition("special"), config_path=path)
    assert special.atol == 0.0625 and special.timeouts.timing == 12 and special.timeouts.build == 300
    assert special.origin["timeouts.timing"] == "definition:special"
    request = resolve_config(_definition("special"), {"atol": 1e-4, "rtol": None}, config_path=path)
    assert request.atol == 1e-4 and request.rtol == 0.125
    assert request.origin["atol"] == "request" and request.origin["rtol"] == "op_type:gemm"


def test_environment_variable_names_the_operator_file(tmp_path, monkeypatch):
    path = tmp_path / "eval.yaml"
    path.write_text("defaults: {trials: 5}\n")
    monkeypatch.setenv(CONFIG_ENV, str(path))
    assert resolve_config(None).trials == 5


@pytest.mark.parametrize(
    ("overrides", "phrase"),
    [
        ({"atol": -1}, "request"),
        ({"iterations": 0}, "request"),
        ({"bogus": 1}, "bogus"),
        ({"timeouts": {"timing": -5}}, "timing"),
    ],
)
def test_invalid_values_are_rejected_naming_the_layer(overrides, phrase):
    with pytest.raises(ValueError, match=phrase):
        resolve_config(_definition(), overrides)


def test_unknown_section_in_a_file_is_an_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("default: {atol: 1}\n")
    with pytest.raises(ValueError, match="unknown sections"):
        resolve_config(None, config_path=path)


def test_config_round_trips_as_json():
    config = resolve_config(_definition(), {"atol": 0.2})
    assert EvalConfig.model_validate_json(config.model_dump_json()) == config


def test_an_edited_config_file_takes_effect_at_once_and_no_caller_shares_a_parse(
    tmp_path, monkeypatch
) -> None:
    """Parses are kept by content (resolving the packaged defaults was half of a CPU evaluation): an operator's
    edit is still read on the next resolve, and a caller that changes what it got changes nobody else's."""
    from fibserve.bench import config

    monkeypatch.delenv(config.CONFIG_ENV, raising=False)
    config.resolve_config(None)
    kept = config._parsed.cache_info().hits
    config.resolve_config(None)
    assert config._parsed.cache_info().hits == kept + 1  # the packaged defaults were not parsed again
    path = tmp_path / "operator.yaml"
    path.write_text("defaults:\n  iterations: 7\n")
    assert config.resolve_config(None, config_path=path).iterations == 7
    path.write_text("defaults:\n  iterations: 9\n")
    assert config.resolve_config(None, config_path=path).iterations == 9
    config._load_yaml(None)["defaults"]["iterations"] = -1
    assert config.resolve_config(None).iterations == 50
