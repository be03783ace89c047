"""Page rendering: how a figure or widget reaches the page, at a laptop's and a phone's width.

It imports nothing else of lstpe, so every floor that draws (measures with their figures,
:mod:`lstpe.figures`, the brain, the tutorial, the chapters) uses it from below.

- :mod:`~lstpe.rendering.style`       the house style: column width, text >= 9 pt, its checks
- :mod:`~lstpe.rendering.phone`       a finished figure laid out again for a phone's column
- :mod:`~lstpe.rendering.responsive`  both renderings in one ``<picture>``, each checked
- :mod:`~lstpe.rendering.widgets`     a widget with a static twin for the built page
"""
