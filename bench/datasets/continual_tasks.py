"""A sequence of permuted-image tasks (permuted MNIST, Laplace Redux appendix C.4): the
dataset node of continual-learning experiments (``conf/dataset/permuted_mnist.yaml``).

:class:`PermutedImageTasks` is an :class:`~bench.datasets.image_classification.
ImageClassificationData` (same files, splits, subsets and checks) that also says how many
tasks there are and after which tasks the test sets seen so far are scored. Task ``t``
(0-based) shows every image with the pixel order
:func:`bench.datasets.image_transforms.pixel_permutation` draws for ``t``: task 0 the images as
they are, task t > 0 numpy's ``RandomState(t).permutation`` (the code's ``np.random.seed(t)``
then ``shuffle``). Both settings are checked when the node is built, so a bad value stops a run
with one line before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from bench.datasets.image_classification import ImageClassificationData
from bench.datasets.image_transforms import permute_pixels, pixel_permutation
from bench.harness.errors import ConfigError, require_choice

EVALUATIONS = ("every_task", "last_task")


def permuted_task(images: Tensor, task: int) -> Tensor:
    """``images [N, ...]`` with the pixel order of task ``task`` (0-based; 0 is the identity)."""
    return permute_pixels(images, pixel_permutation(task, images[0].numel()))


@dataclass
class PermutedImageTasks(ImageClassificationData):
    """``n_tasks`` pixel-permuted copies of an image set, learned one after another.

    ``evaluate_after``: ``every_task`` scores the method's predictive on the test sets of every
    task seen so far after each task (the full accuracy matrix), ``last_task`` after the last
    task only (the paper's metric, at a tenth of the cost for 10 tasks).
    """

    n_tasks: int = 10
    evaluate_after: str = "every_task"

    def __post_init__(self) -> None:
        super().__post_init__()
        value = self.n_tasks
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"dataset.n_tasks={value!r} is not valid; it must be an integer "
                              ">= 1 (Laplace Redux: 10)")
        require_choice("dataset.evaluate_after", self.evaluate_after, EVALUATIONS)

    def task_name(self, task: int) -> str:
        """The name of task ``task``'s data (``mnist_permuted_3``)."""
        return f"{self.images}_permuted_{task}"

    def evaluated_after(self, task: int) -> bool:
        """Whether the test sets seen so far are scored after task ``task`` (0-based)."""
        return self.evaluate_after == "every_task" or task == self.n_tasks - 1
