"""Drop the attention maps at initialisation from the fragments stored before publication did.

    python scripts/compact_fragments.py [--results results]

Each stored fragment whose maps this code recomputes (within float16 rounding) loses them;
:func:`lstpe.experiments.fragments.compact_stored` says how. Prints one line per fragment:
``dropped`` with the largest |difference| from the stored maps, or ``unchanged`` (none stored,
as in Table 4's and Tables 5-6's runs; already dropped; or not recomputed within tolerance).
"""

from __future__ import annotations

import argparse

from lstpe.experiments import fragments as fr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=None, help="the results folder (default: results/)")
    args = ap.parse_args()
    dropped = same = 0
    for u in fr.done_units(args.results):
        diff = fr.compact_stored(u, args.results)
        dropped, same = dropped + (diff is not None), same + (diff is None)
        print(f"{u.key}: {'unchanged' if diff is None else f'dropped (max |diff| {diff:.2g})'}",
              flush=True)
    print(f"{dropped} fragment(s) dropped their maps at initialisation, {same} unchanged")


if __name__ == "__main__":
    main()
