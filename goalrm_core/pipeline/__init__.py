"""The pipeline: what runs the notebooks and records what they found. A profile is read and checked
(``profile_files``, ``profile_values``, ``profile_rules``, ``profile_checks``), each stage's notebook runs
under papermill (``runner``, ``execute``, ``notebook_params``, ``batch_run``, ``signals``) and records its
metrics, provenance and timings (``stage``, ``records``, ``provenance``), the run's progress and status are
kept (``progress``, ``status``), and ``sweep`` runs it once per point of a grid. The pages are drawn from
those records by :mod:`goalrm_core.report`, which never imports this package."""
