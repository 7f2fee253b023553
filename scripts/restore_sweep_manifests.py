"""Write back the completion manifests (``<point>/point.json``) of a committed sweep whose manifests were
never committed, from the evidence that is: each point's own ``metrics.json``.

    python scripts/restore_sweep_manifests.py --spec ablations --reports-dir reports

The comparison page counts a point complete only where its manifest is there. Until the manifests were
committed with the points (``.gitignore`` now keeps them), a page re-rendered from a clean clone
(``goalrm sweep --index-only``) said that no point had finished, although every point's metrics are
committed. A manifest is written back only where the point's ``metrics.json`` holds every stage the
sweep runs and its recorded profile parameters equal the overrides the plan gives that point today (the
same test :func:`goalrm_core.pipeline.sweep.point_complete` applies); anything else is refused and nothing
is written. Each restored manifest says so (``restored``) and has no ``finished`` time: the original was lost.
A point of a sweep run before the profiles' ``rm:`` block is found in its folder as it was named
(``contrastive_beta=0.1``) and its recorded parameters read under today's names (``rm_steps`` is ``max_steps``).
"""

from __future__ import annotations

import argparse
import json
import sys

from goalrm_core.data.io import atomic_write_json
from goalrm_core.pipeline.sweep import load_sweep_spec, plan_sweep
from goalrm_core.report.sweep_layout import POINT_MANIFEST, renamed_parameters


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", required=True, help="params/<spec>.yaml, as goalrm sweep --spec takes it")
    parser.add_argument("--reports-dir", default="reports", help="the folder the sweep's report lies under")
    args = parser.parse_args(argv)
    spec = load_sweep_spec(args.spec, "params")
    plan = plan_sweep(
        spec["profile"],
        spec["grid"],
        one_at_a_time=spec["one_at_a_time"],
        stages=spec["stages"],
        seeds=spec["seeds"],
        common=spec["common"],
        name=spec["name"],
        reports_root=args.reports_dir,
    )
    manifests, faults = {}, []
    for point in plan.points:
        folder = plan.report_folder(point.name)
        if (folder / POINT_MANIFEST).exists():
            continue
        try:
            metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            faults.append(f"{folder / 'metrics.json'}: {err}")
            continue
        missing = [
            s for s in plan.stages if s.split("_", 1)[-1] not in metrics
        ]  # a stage writes the section of its topic
        recorded = renamed_parameters(metrics.get("provenance", {}).get("profile", {}).get("parameters", {}))
        overrides = json.loads(json.dumps(plan.overrides(point)))
        differ = {k: (recorded.get(k), v) for k, v in overrides.items() if recorded.get(k) != v}
        if missing or differ:
            faults.append(
                f"{folder / 'metrics.json'}: stages without results {missing}, parameters recorded vs planned {differ}"
            )
            continue
        manifests[folder / POINT_MANIFEST] = {
            "point": point.name,
            "values": point.values,
            "overrides": overrides,
            "stages": plan.stages,
            "finished": None,
            "restored": "from this point's metrics.json (its stages and recorded parameters); "
            "the manifest written when it finished was not committed",
        }
    if faults:
        print("nothing written:\n  " + "\n  ".join(faults), file=sys.stderr)
        return 2
    for path, manifest in manifests.items():
        atomic_write_json(path, manifest)
    print(f"{len(manifests)} manifest(s) restored under {plan.report_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
