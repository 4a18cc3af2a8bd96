"""Hydra's basic sweeper, minus the jobs that already have a record.

Selected in ``conf/config.yaml`` (``hydra/sweeper: bench``). Each batch of jobs is split by
:func:`bench.harness.finished_jobs.split_finished` before the launcher sees it, so a
resubmitted Slurm multirun submits only the unfinished jobs. A finished job still reaches the
callbacks' ``on_job_end`` as ``skipped``, so the progress line counts it.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class SkipFinishedLauncher(Launcher):
    """Wraps the configured launcher: launches only the unfinished jobs of each batch."""

    def __init__(self, inner: Launcher, hydra_context: HydraContext,
                 config: DictConfig) -> None:
        self.inner = inner
        self.hydra_context = hydra_context
        self.config = config

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction,
              config: DictConfig) -> None:
        """Set up the wrapped launcher."""
        self.config = config
        self.inner.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def launch(self, job_overrides: Sequence[Sequence[str]],
               initial_job_idx: int) -> Sequence[JobReturn]:
        """Report the finished jobs as skipped and launch the others."""
        from bench.harness.finished_jobs import split_finished

        loader = self.hydra_context.config_loader
        to_run, finished = split_finished(self.config, loader.load_sweep_config, job_overrides)
        for overrides, _status, _folder in finished:
            self.hydra_context.callbacks.on_job_end(
                config=self.config,
                job_return=JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED,
                                     _return_value="skipped"))
        if not to_run:
            return []
        return self.inner.launch(to_run, initial_job_idx=initial_job_idx)


class SkipFinishedSweeper(BasicSweeper):
    """:class:`BasicSweeper` whose launcher skips the jobs that already have a record."""

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction,
              config: DictConfig) -> None:
        """Set up as the basic sweeper, then wrap its launcher."""
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        self.launcher = SkipFinishedLauncher(self.launcher, hydra_context, config)
