"""The experiment config and its expansion, against the bundled trace set: selectors, suites, tags per language,
stable trajectory ids and seeds, clear errors; the shipped configs expand; `ptxbench experiment schema/plan`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mini_ptx_agent.experiments.config import (
    ExperimentConfig,
    ExperimentConfigError,
    config_hash,
    load_config,
    shipped_configs,
)
from mini_ptx_agent.experiments.plan import LocalCatalog, describe, expand, select_definitions


@pytest.fixture(scope="module")
def catalog() -> LocalCatalog:
    return LocalCatalog()


def config(**fields) -> ExperimentConfig:
    base = {"name": "t", "definitions": "ci", "languages": ["triton"], "models": ["m/a"]}
    return ExperimentConfig.model_validate(base | fields)


def test_selectors_and_suites(catalog: LocalCatalog) -> None:
    assert select_definitions(config(definitions="ci"), catalog) == [
        "rmsnorm_f32", "softmax_rows_f32", "vector_add_f32",
    ]  # fmt: skip
    assert len(select_definitions(config(definitions="gemm"), catalog)) == 17
    mha_fwd = select_definitions(config(definitions="mha-fwd"), catalog)
    assert len(mha_fwd) == 8 and all(n.startswith("mha_with_lse_") for n in mha_fwd)
    assert select_definitions(
        config(definitions={"suites": ["mha-bwd"], "tags": ["causal"]}), catalog
    ) == sorted(
        {*(f"mha_bwd_d{d}{c}" for d in (64, 96, 128) for c in ("", "_causal"))}
        | {n for n in select_definitions(config(definitions={"tags": ["causal"]}), catalog)}
    )
    by_type = select_definitions(
        config(definitions={"op_types": ["mha_bwd"], "exclude": ["mha_bwd_d64"]}), catalog
    )
    assert len(by_type) == 5 and "mha_bwd_d64" not in by_type
    assert select_definitions(config(definitions=["vector_add_f32"]), catalog) == ["vector_add_f32"]


def test_bad_selections_say_what_to_fix(catalog: LocalCatalog) -> None:
    with pytest.raises(ExperimentConfigError, match="did you mean vector_add_f32"):
        select_definitions(config(definitions=["vector_add_f23"]), catalog)
    with pytest.raises(ExperimentConfigError, match="selects no definition"):
        select_definitions(config(definitions={"op_types": ["conv"]}), catalog)
    with pytest.raises(ValueError, match="at least one definition"):
        config(definitions={"exclude": ["x"]})


def test_expansion_ids_seeds_and_counts(catalog: LocalCatalog) -> None:
    cfg = config(
        definitions=["vector_add_f32", "softmax_rows_f32"], workloads=1, replicas=2, num_turns=3,
        prompt_tags=["triton-hopper", "triton-hopper-attention"], models=["scripted/good", "scripted/broken"],
    )  # fmt: skip
    plan = expand(cfg, catalog, name="e")
    assert len(plan.trajectories) == 16 and len(plan.cells) == 8 and plan.expected_model_calls == 48
    ids = [t.id for t in plan.trajectories]
    assert len(set(ids)) == 16 and ids[0] == "softmax_rows_f32.triton-hopper.scripted-good.r0"
    assert all(len(t.workloads) == 1 for t in plan.trajectories)
    assert [t.replica for t in plan.trajectories] == [0] * 8 + [1] * 8  # every cell gets a replica first
    # Stable: a third replica and a third model add trajectories and keep every id and seed.
    bigger = expand(
        cfg.model_copy(update={"replicas": 3, "models": [*cfg.models, *config(models=["x/y"]).models]}),
        catalog,
    )
    old = {t.id: t.seed for t in plan.trajectories}
    assert {t.id: t.seed for t in bigger.trajectories if t.id in old} == old and len(
        bigger.trajectories
    ) == 36
    assert len(set(old.values())) == 16
    info = describe(plan)
    assert info["trajectories"] == 16 and info["expected_model_calls"] == 48 and info["trajectory_ids"] == ids


def test_tags_follow_languages(catalog: LocalCatalog) -> None:
    both = expand(config(definitions=["vector_add_f32"], languages=["cuda", "triton"],
                         prompt_tags=["hopper-no-hint", "triton-hopper"]), catalog)  # fmt: skip
    assert {(t.language, t.prompt_tag) for t in both.trajectories} == {
        ("cuda", "hopper-no-hint"),
        ("triton", "triton-hopper"),
    }
    defaults = expand(config(definitions=["vector_add_f32"], languages=["cuda", "triton"]), catalog)
    assert {t.prompt_tag for t in defaults.trajectories} == {"hopper-no-hint", "triton-hopper"}
    with pytest.raises(ExperimentConfigError, match="written for cuda on sm_90a"):
        expand(config(definitions=["vector_add_f32"], prompt_tags=["hopper-no-hint"]), catalog)
    with pytest.raises(ExperimentConfigError, match="none is written for cuda"):
        expand(
            config(
                definitions=["vector_add_f32"], languages=["cuda", "triton"], prompt_tags=["triton-hopper"]
            ),
            catalog,
        )
    with pytest.raises(ExperimentConfigError, match="did you mean triton-hopper"):
        expand(config(definitions=["vector_add_f32"], prompt_tags=["triton-hoper"]), catalog)
    with pytest.raises(ExperimentConfigError, match="is not a workload"):
        expand(
            config(
                definitions=["vector_add_f32"], workloads=["fea76944-a9e9-5a63-b79f-53eb46ecdafd", "nope"]
            ),
            catalog,
        )


def test_config_files_hash_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("name: t\ndefinitions: ci\nlanguages: [triton]\nmodels: [m/a]\nreplicas: 2\n")
    loaded = load_config(path)
    assert loaded.replicas == 2 and loaded.definitions.suites == ["ci"]
    assert config_hash(loaded) == config_hash(
        ExperimentConfig.model_validate(json.loads(loaded.model_dump_json()))
    )
    assert config_hash(loaded) != config_hash(loaded.model_copy(update={"replicas": 3}))
    path.write_text("name: t\ndefinitions: ci\nmodels: [m/a]\nreplicas: 0\nnum_turn: 3\n")
    with pytest.raises(
        ExperimentConfigError, match=r"replicas: Input should be greater than or equal to 1.*num_turn"
    ):
        load_config(path)
    with pytest.raises(ExperimentConfigError, match="gemm-smoke"):
        load_config(tmp_path / "missing.yaml")


def test_shipped_configs_expand(catalog: LocalCatalog) -> None:
    shipped = shipped_configs()
    studies = ("gemm", "mha-fwd", "mha-bwd", "gqa", "mla", "gdn", "fp8-gemm")
    assert set(shipped) == {*studies, *(f"{name}-smoke" for name in studies), "ci-smoke"}
    ci = expand(load_config("ci-smoke"), catalog)  # the demo on a CPU: no key to set, no model to edit
    assert [(t.model, t.definition, t.language) for t in ci.trajectories] == [
        ("demo", "vector_add_f32", "triton")
    ]
    assert ci.num_turns == 2 and len(ci.trajectories[0].workloads) == 3  # N = 1000 shows turn 1's bug
    for name in ("gemm", "mha-fwd", "mha-bwd"):
        cfg = load_config(name)
        plan = expand(cfg, catalog)
        assert (len(cfg.prompt_tags), cfg.replicas, cfg.num_turns, cfg.target_speedup) == (3, 4, 8, 1.2)
        assert len(plan.trajectories) == len({t.definition for t in plan.trajectories}) * 3 * 4
    for name in (f"{study}-smoke" for study in studies):
        plan = expand(load_config(name), catalog)
        assert (
            len(plan.trajectories) == 1
            and plan.expected_model_calls == 1
            and len(plan.trajectories[0].workloads) == 1
        )


def test_the_inference_suites_select_their_definitions_and_plan(catalog: LocalCatalog) -> None:
    sizes = {"gqa": 29, "mla": 3, "gdn": 6, "fp8-gemm": 6}
    for suite, size in sizes.items():
        names = select_definitions(config(definitions=suite), catalog)
        assert len(names) == size, suite
    assert all(n.startswith("gqa_") for n in select_definitions(config(definitions="gqa"), catalog))
    # Each prompt tag applies to its own language: 2 CUDA cells and 1 Triton cell per definition
    plan = expand(load_config("gqa"), catalog)
    assert len(plan.trajectories) == 29 * 3 * 4
    assert {t.prompt_tag for t in plan.trajectories if t.language == "triton"} == {
        "triton-hopper-paged-attention"
    }
    assert load_config("gdn").target_speedup == 10.0  # against the reference: GDN's baseline


def test_schema_and_plan_commands() -> None:
    from mini_ptx_agent.cli import app
    from typer.testing import CliRunner

    runner = CliRunner()
    schema = json.loads(runner.invoke(app, ["experiment", "schema"]).stdout)
    assert "Independent trajectories per cell" in schema["properties"]["replicas"]["description"]
    result = runner.invoke(app, ["experiment", "plan", "gemm-smoke", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["trajectory_ids"] == [
        "gemm_n7168_k5120.hopper-tma-store.anthropic-claude-sonnet-4-5.r0"
    ]
    bad = runner.invoke(app, ["experiment", "plan", "no-such-config"])
    assert bad.exit_code == 2 and "shipped config" in bad.output
    typo = runner.invoke(app, ["experiment", "run", "gemm-smok"])
    assert typo.exit_code == 2 and "did you mean gemm-smoke" in " ".join(typo.output.split()), typo.output
    assert "Traceback" not in typo.output
