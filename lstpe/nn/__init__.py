"""The networks: positional encodings (:mod:`~lstpe.nn.encodings`), each PE's block as the
authors built it (:mod:`~lstpe.nn.architecture`), attention, per-model dropout, and the LST
transformer in its plain and batched forms (:mod:`~lstpe.nn.model`).
"""
