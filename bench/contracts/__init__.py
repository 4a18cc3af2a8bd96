"""The method vocabulary: the :class:`~bench.contracts.method.Method` contract every method
follows, the data families it fits on, and the small capability protocols a task asks for by
``isinstance`` beyond ``fit`` / ``predict`` (:mod:`bench.contracts.capabilities`).

Nothing here imports the harness or the method classes: a method joins a family or a
capability by having its members (structural typing), never by naming a class here.
"""
