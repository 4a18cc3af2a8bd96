"""The VI baselines' fast loop against its oracle, the authors' Lightning Trainer.

Both loops start from ``seed_everything``; the fast one must end with the same trained
parameters and buffers (``torch.equal``), the same epochs and diagnostics, the global torch RNG
in the same state (the Monte Carlo draws of every training and validation step, the loaders'
seeds) and so the same predictive mean and variance. MFVI runs across the end of its MSE
burn-in (the loss switches to the NLL at epoch ``burnin_epochs``, read from the epoch the loop
reports); alpha-VI also stops early (patience 1: at epoch 5). Data: Table 2's heteroscedastic
toy at 230 points, batches of 11: 184 training rows (16 full batches and a partial last one of
8) and 13 validation rows in batches of 11 and 2 (Lightning's batch-size-weighted ``val_loss``
differs from the plain mean of the batch losses). Batches of 11 rather than 5 and patience 1
rather than 2: the same checks in under half the steps (the four Lightning trainings took
~66 s of test time on 2 loaded cores before).
"""

from __future__ import annotations

import pytest
import torch

from bench.datasets.toy import heteroscedastic_toy
from bench.harness.errors import ConfigError
from bench.methods.baselines.vi import AlphaVIMethod, MFVIMethod

X_PREDICT = torch.linspace(-4.0, 4.0, 9)[:, None]
N_POINTS, BATCH_SIZE = 230, 11


def _fit(method_cls, loop: str, **kwargs) -> dict:
    """Trained state, diagnostics (less wall time), RNG state after fit and the predictive."""
    method = method_cls(loop=loop, batch_size=BATCH_SIZE, **kwargs)
    diagnostics = method.fit(heteroscedastic_toy(0, n_points=N_POINTS), seed=3)
    rng = torch.get_rng_state()
    predictive = method.predict(X_PREDICT)
    del diagnostics["fit_s"]
    return {"state": method.module.state_dict(), "diagnostics": diagnostics, "rng": rng,
            "mean": predictive.mean, "variance": predictive.variance}


def _assert_same_training(method_cls, **kwargs) -> dict:
    oracle, fast = _fit(method_cls, "lightning", **kwargs), _fit(method_cls, "fast", **kwargs)
    assert oracle["state"].keys() == fast["state"].keys()
    for name, value in oracle["state"].items():
        assert torch.equal(fast["state"][name], value), name
    assert fast["diagnostics"] == oracle["diagnostics"]
    for key in ("rng", "mean", "variance"):
        assert torch.equal(fast[key], oracle[key]), key
    return fast["diagnostics"]


@pytest.mark.parametrize("max_epochs", [2, 4])
@pytest.mark.second_tier
def test_fast_loop_gives_lightnings_mfvi_across_the_burn_in(max_epochs):
    diagnostics = _assert_same_training(MFVIMethod, max_epochs=max_epochs, burnin_epochs=2)
    assert diagnostics["epochs"] == max_epochs and not diagnostics["stopped_early"]


@pytest.mark.second_tier
def test_fast_loop_gives_lightnings_alpha_vi():
    diagnostics = _assert_same_training(AlphaVIMethod, max_epochs=3)
    assert diagnostics["epochs"] == 3 and not diagnostics["stopped_early"]


@pytest.mark.second_tier
def test_fast_loop_gives_lightnings_alpha_vi_when_stopping_early():
    diagnostics = _assert_same_training(AlphaVIMethod, max_epochs=60, patience=1)
    assert diagnostics["stopped_early"] and 2 < diagnostics["epochs"] < 60
    assert diagnostics["best_val_loss"] < diagnostics["val_loss"]


@pytest.mark.parametrize("method_cls", [MFVIMethod, AlphaVIMethod])
def test_bad_loop_or_a_fast_loop_off_the_cpu_is_a_config_error(method_cls):
    with pytest.raises(ConfigError, match="method.loop"):
        method_cls(loop="trainer")
    with pytest.raises(ConfigError, match="method.loop=lightning"):
        method_cls(accelerator="gpu")
    assert method_cls(accelerator="gpu", loop="lightning").loop == "lightning"
