"""Online marginal-likelihood training against laplace-torch's ``marglik_training`` (same
minibatches, float64, bit for bit), the best-epoch restore, exact resume after a kill, the
refit subset's scaling and the last-layer prior mapping."""

from __future__ import annotations

import copy
import math
import warnings

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.harness.state_store import Checkpoints
from bench.methods.laplace.marglik import fit_laplace, laplace_evidence
from bench.methods.laplace.marglik_training import (
    BestEpoch,
    OnlineMarglikSettings,
    RunStreams,
    last_layer_name,
    refit_rows,
    tensor_precisions,
    train_online_marglik,
)

laplace = pytest.importorskip("laplace")

N, BATCH, EPOCHS, HYPER_STEPS = 24, 8, 3, 5
STREAMS = RunStreams(minibatch=11, global_rng=1, refit=2)


def tiny_network() -> nn.Module:
    """Conv 1->2 (3x3), ReLU, flatten, Linear 32->5, ReLU, Linear 5->3; float64."""
    torch.manual_seed(1)
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(32, 5),
                         nn.ReLU(), nn.Linear(5, 3)).double()


@pytest.fixture(scope="module")
def data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = make_generator(0)
    return (torch.randn(N, 1, 6, 6, generator=generator, dtype=torch.float64),
            torch.randint(0, 3, (N,), generator=generator))


def settings(**overrides) -> OnlineMarglikSettings:
    values = {"epochs": EPOCHS, "batch_size": BATCH, "hyper_steps": HYPER_STEPS,
              "refit_batch_size": BATCH}
    return OnlineMarglikSettings(**{**values, **overrides})


def train(network, data, folder, structure="diag", **overrides):
    folder.mkdir(parents=True, exist_ok=True)
    return train_online_marglik(network, *data, settings(**overrides),
                                laplace_evidence("all", structure, "AsdlGGN"), STREAMS,
                                Checkpoints(folder))


class ReplayedBatches:
    """A batch sampler giving ``marglik_training`` our loop's minibatches: per epoch it
    iterates the loader to train (our generator's permutation), then ``Laplace.fit`` peeks one
    batch and iterates it (in order, as our refit loader)."""

    def __init__(self, seed: int) -> None:
        self.generator = make_generator(seed)
        self.calls = 0

    def __iter__(self):
        call, self.calls = self.calls, self.calls + 1
        if call % 3 == 0:
            return iter([b.tolist() for b in torch.randperm(N, generator=self.generator)
                         .split(BATCH)])
        return iter([list(range(i, min(i + BATCH, N))) for i in range(0, N, BATCH)])

    def __len__(self) -> int:
        return math.ceil(N / BATCH)


@pytest.mark.parametrize("structure", ["diag", "kron", "full"])
@pytest.mark.second_tier
def test_the_loop_is_laplace_torchs_marglik_training_on_the_same_minibatches(
        structure, data, tmp_path):
    theirs = tiny_network()
    loader = DataLoader(TensorDataset(*data), batch_sampler=ReplayedBatches(STREAMS.minibatch))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        la, model, margliks, losses = laplace.marglik_training(
            theirs, loader, "classification", hessian_structure=structure,
            backend=laplace.curvature.AsdlGGN, optimizer_kwargs={"lr": 1e-3},
            scheduler_cls=torch.optim.lr_scheduler.CosineAnnealingLR,
            scheduler_kwargs={"T_max": EPOCHS * 3, "eta_min": 1e-6}, n_epochs=EPOCHS,
            lr_hyp=1.0, prior_structure="layerwise", n_hypersteps=HYPER_STEPS,
            marglik_frequency=1, prior_prec_init=30.0)
        ours = tiny_network()
        result = train(ours, data, tmp_path, structure)
    for mine, reference in zip(ours.parameters(), model.parameters(), strict=True):
        assert torch.equal(mine, reference)
    assert torch.equal(result.prior_precision, la.prior_precision)
    assert [e["neg_log_marglik"] for e in result.history] == margliks[HYPER_STEPS - 1::HYPER_STEPS]
    assert [e["objective"] for e in result.history] == pytest.approx(losses, rel=1e-14)
    values = [e["neg_log_marglik"] for e in result.history]
    assert result.best_epoch == 1 + values.index(min(values))
    assert result.best_neg_log_marglik == min(values)


def test_the_best_epoch_is_restored_with_its_prior(data, tmp_path, monkeypatch):
    """Evidence values 5, 3, 4 at epochs 1-3: the weights saved after epoch 2 come back."""
    saved = []
    save = Checkpoints.save
    monkeypatch.setattr(Checkpoints, "save", lambda self, values: (
        saved.append(copy.deepcopy(values)), save(self, values))[1])
    levels = iter([5.0, 3.0, 4.0])

    def evidence(network, loader, prior, temperature, last_layer):
        level = next(levels)
        return lambda precision: level + 1e-3 * (precision.log() - level).square().sum()

    network = tiny_network()
    result = train_online_marglik(network, *data, settings(), evidence, STREAMS,
                                  Checkpoints(tmp_path))
    assert result.best_epoch == 2
    assert [e["best"] for e in result.history] == [True, True, False]
    for name, value in network.state_dict().items():
        assert torch.equal(value, saved[1]["model"][name]), name
        assert not torch.equal(value, saved[2]["model"][name]), name
    assert result.prior_precision.tolist() == result.history[1]["prior_precision"]
    assert result.prior_precision.tolist() != result.history[2]["prior_precision"]
    assert result.best_neg_log_marglik == pytest.approx(3.0, abs=1e-2)


def test_a_killed_run_resumes_at_its_last_epoch_exactly(data, tmp_path, monkeypatch):
    straight = tiny_network()
    expected = train(straight, data, tmp_path / "straight", "kron")
    save = Checkpoints.save
    kills = iter([False, True])

    def save_then_maybe_die(self, values):
        save(self, values)
        if next(kills, False):
            raise KeyboardInterrupt

    monkeypatch.setattr(Checkpoints, "save", save_then_maybe_die)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_network(), data, tmp_path / "killed", "kron")
    monkeypatch.setattr(Checkpoints, "save", save)
    resumed = tiny_network()
    result = train(resumed, data, tmp_path / "killed", "kron")
    assert len(result.history) == EPOCHS
    for mine, reference in zip(resumed.parameters(), straight.parameters(), strict=True):
        assert torch.equal(mine, reference)
    assert torch.equal(result.prior_precision, expected.prior_precision)
    assert [e["neg_log_marglik"] for e in result.history] == \
        [e["neg_log_marglik"] for e in expected.history]


def test_a_subset_refit_scales_curvature_and_loss_to_the_full_set(data):
    """On a training set that is the subset twice over, the subset refit at temperature 1/2
    is the full-set fit exactly."""
    x, y = data
    network = tiny_network().eval()
    doubled = DataLoader(TensorDataset(torch.cat([x, x]), torch.cat([y, y])), batch_size=N)
    subset = DataLoader(TensorDataset(x, y), batch_size=N)
    prior = torch.full((6,), 2.0, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = fit_laplace(network, doubled, "all", "diag", "AsdlGGN", prior)
        scaled = fit_laplace(network, subset, "all", "diag", "AsdlGGN", prior, temperature=0.5)
        plain = fit_laplace(network, subset, "all", "diag", "AsdlGGN", prior)
    assert torch.allclose(scaled.posterior_precision, full.posterior_precision, rtol=1e-12)
    assert float(scaled.log_likelihood) == pytest.approx(float(full.log_likelihood), rel=1e-12)
    assert float(scaled.log_likelihood) == pytest.approx(2 * float(plain.log_likelihood),
                                                         rel=1e-12)
    assert float(scaled.log_marginal_likelihood()) == pytest.approx(
        float(full.log_marginal_likelihood()), rel=1e-12)


def test_refit_rows_are_a_fixed_sorted_subset_or_every_row():
    rows = refit_rows(100, 10, make_generator(3))
    assert len(rows) == 10 and len(set(rows.tolist())) == 10
    assert torch.equal(rows, rows.sort().values) and int(rows.max()) < 100
    assert torch.equal(rows, refit_rows(100, 10, make_generator(3)))
    assert torch.equal(refit_rows(100, None, make_generator(3)), torch.arange(100))


def test_a_last_layer_prior_covers_the_last_layer_and_the_rest_keep_delta_0():
    network = tiny_network()
    assert last_layer_name(network) == "5"
    learned = torch.tensor([4.0], dtype=torch.float64)
    last = tensor_precisions(learned, network, settings(subset_of_weights="last_layer",
                                                        prior_structure="scalar"), "5")
    assert last.tolist() == [30.0, 30.0, 30.0, 30.0, 4.0, 4.0]
    every = tensor_precisions(learned, network, settings(prior_structure="scalar"), "5")
    assert every.tolist() == [4.0] * 6
    layerwise = torch.arange(1.0, 7.0, dtype=torch.float64)
    assert torch.equal(tensor_precisions(layerwise, network, settings(), "5"), layerwise)


def test_best_epoch_keeps_the_strictly_lowest_value():
    best, network = BestEpoch(), tiny_network()
    assert best.offer(1, 5.0, network, torch.tensor([1.0]))
    assert not best.offer(2, 5.0, network, torch.tensor([2.0]))
    assert not best.offer(3, math.nan, network, torch.tensor([3.0]))
    assert best.offer(4, 4.0, network, torch.tensor([4.0]))
    assert (best.epoch, best.prior_precision.tolist()) == (4, [4.0])
    assert BestEpoch.from_dict(best.to_dict()).epoch == 4


@pytest.mark.parametrize(("overrides", "message"), [
    ({"prior_precision": 0.0}, "method.prior_precision=0.0 is not valid; it must be a "
                               "positive number"),
    ({"prior_precision": -30.0}, "method.prior_precision=-30.0 is not valid"),
    ({"prior_structure": "diag"}, "method.prior_structure='diag' is not valid; choose one of: "
                                  "scalar, layerwise"),
    ({"subset_of_weights": "last_layer"}, "method.prior_structure='layerwise' is not valid "
                                          "with method.subset_of_weights='last_layer'"),
    ({"refit_size": 0}, "method.refit_size=0 is not valid"),
    ({"marglik_frequency": 0}, "method.marglik_frequency=0 is not valid"),
])
def test_bad_settings_are_one_line_config_errors_naming_the_key(overrides, message):
    with pytest.raises(ConfigError) as error:
        settings(**overrides).check()
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
