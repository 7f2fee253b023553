"""The pages: records -> pages. What a run recorded (``metrics.json`` read through :mod:`.metrics_view`,
``status.json``, the executed notebooks) becomes the report's HTML, its README block and ``goalrm compare``'s
text. Nothing here runs a notebook or imports :mod:`goalrm_core.pipeline`, which runs them and calls on these
pages (``tests/test_layers.py`` holds both to that)."""
