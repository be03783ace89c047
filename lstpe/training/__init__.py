"""Training: the config and presets (:mod:`~lstpe.training.config`), the optimizer, the
engine (the one loop), the LST task, the noise test, costs and this machine's floor, and
``train`` / ``train_many`` (:mod:`~lstpe.training.train`).
"""
