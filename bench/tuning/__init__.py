"""Optuna hyperparameter tuning behind ``python -m bench.tune``.

``space``: search spaces as data (conf/tune/*.yaml) turned into trial suggestions;
``study``: storage, study creation and the trial loop; ``export``: the best trial as a
conf/tuned/ YAML file; ``objectives``: the functions a space's ``objective.target`` names.
"""
