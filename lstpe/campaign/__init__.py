"""This project's own CPU campaign: the scheduler that grows the paper's runs on 2-core CPUs.

Nothing a reader runs imports it (the chapters read what it stored through
:mod:`lstpe.experiments`; a test holds them to that). Its modules, in the order a run goes:

- :mod:`~lstpe.campaign.items`      the order of the plan's 200-epoch items and why
- :mod:`~lstpe.campaign.precision`  the precision pair: does bf16 earn its speed on this CPU
- :mod:`~lstpe.campaign.probe`      this machine's rate, measured before a chunk is sized
- :mod:`~lstpe.campaign.long_plan`  the long units' legs, their costs and the CPU's order
- :mod:`~lstpe.campaign.resume`     a long chunk's resume state, checked against its model folders
- :mod:`~lstpe.campaign.long_train` a long chunk trained to a deadline, segment by segment
- :mod:`~lstpe.campaign.packed`     long chunks of different start epochs in one batch
- :mod:`~lstpe.campaign.scheduler`  ``lstpe campaign run``: pick the next models, train, publish
- :mod:`~lstpe.campaign.long_progress`, :mod:`~lstpe.campaign.status`  what is done
- :mod:`~lstpe.campaign.cli`        the ``lstpe campaign`` commands
"""
