"""The paper MLP's fast loop against its oracle, the authors' Lightning Trainer.

Both loops start from ``seed_everything(42)``; the fast one must end with the same weights
(``torch.equal``), the same epoch count and the global torch RNG in the same state (so what the
job draws next is unchanged), on Table 2's toy and on a UCI set whose validation split takes
two batches (Lightning's batch-size-weighted ``val_loss``) and whose last training batch is
partial.
"""

from __future__ import annotations

import pytest
import torch

from bench.harness.errors import ConfigError
from bench.training.regression_network import train_paper_mlp
from tests.helpers import SHARED_DATA

TABLE_2_LR = 0.04016791033073118  # conf/tuned/paper/heteroscedastic/mlp.yaml
REAL_ESTATE = {"lr": 0.039995703319589467, "batch_size": 32}  # conf/tuned/paper/uci/...


def _both_loops(make_splits, **kwargs) -> dict:
    """Weights, epochs and torch RNG state after training with each loop on fresh splits."""
    out = {}
    for loop in ("lightning", "fast"):
        base = train_paper_mlp(make_splits(), seed=42, loop=loop, **kwargs)
        out[loop] = (base.theta, base.diagnostics["epochs"], torch.get_rng_state())
    return out


def _assert_same(out: dict) -> int:
    (theta_l, epochs_l, rng_l), (theta_f, epochs_f, rng_f) = out["lightning"], out["fast"]
    assert torch.equal(theta_f, theta_l)
    assert epochs_f == epochs_l
    assert torch.equal(rng_f, rng_l)
    return epochs_f


@pytest.mark.parametrize(("max_epochs", "patience", "stops_early"),
                         [(60, 5, True), (4, 20, False)])
@pytest.mark.second_tier
def test_fast_loop_gives_lightnings_weights_on_table_2(max_epochs, patience, stops_early):
    from bench.datasets.toy import heteroscedastic_toy

    out = _both_loops(lambda: heteroscedastic_toy(42), lr=TABLE_2_LR, batch_size=64,
                      max_epochs=max_epochs, patience=patience)
    epochs = _assert_same(out)
    assert (epochs < max_epochs) == stops_early
    assert epochs > patience or not stops_early


@pytest.mark.skipif(not (SHARED_DATA / "uci" / "real_estate").is_dir(),
                    reason="needs the shared UCI files")
@pytest.mark.second_tier
def test_fast_loop_gives_lightnings_weights_on_uci_real_estate():
    from bench.datasets.uci import uci_splits

    splits = uci_splits("real_estate", "paper", 42, root=SHARED_DATA)
    assert len(splits.x_val) == 40 and len(splits.x_train) % REAL_ESTATE["batch_size"] != 0
    out = _both_loops(lambda: uci_splits("real_estate", "paper", 42, root=SHARED_DATA),
                      max_epochs=60, patience=5, **REAL_ESTATE)
    assert _assert_same(out) < 60


def test_unknown_loop_is_a_config_error():
    with pytest.raises(ConfigError, match="base.loop"):
        train_paper_mlp(None, seed=0, lr=0.01, batch_size=8, loop="trainer")
