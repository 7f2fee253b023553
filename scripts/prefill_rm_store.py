"""Put a finished run's RMs into an RM store under their keys, so that a rerun whose data stage writes
the same bytes takes them from the store instead of training them again.

    python scripts/prefill_rm_store.py --profile demo --store runs/demo-threads1/rm-store

The rerun must set ``rm_store`` to the same folder. An RM's key (``study.training.rm_key``) is its
training config with the policy and the preference pairs by content, so the rerun reuses an RM only
where its own data stage wrote byte-identical policy and pairs, and the RM's training would be the
same computation (each training process's thread count is ``torch_threads // rm_parallel``, 1 in the
demo at 1 or 2 threads); anything else is trained as usual. The reproducibility rerun at one thread
uses this: its RM trainings would repeat the committed run's exactly.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from goalrm_core.data.io import atomic_write_json
from goalrm_core.data.rundir import RunDir, rm_metrics_path
from goalrm_core.report.profiles import load_profile
from goalrm_core.study.rms import RMS
from goalrm_core.study.training import STORED_KEY, notebook_recipe, rm_config, rm_key


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="demo", help="params/<profile>.yaml: the run's recipe, seeds and run_dir")
    parser.add_argument("--store", required=True, help="the RM store the rerun names as rm_store")
    args = parser.parse_args(argv)
    params = load_profile(args.profile)
    recipe = notebook_recipe(params)
    store = Path(args.store)
    store.mkdir(parents=True, exist_ok=True)
    for rm in RMS:
        for seed in params["rm_seeds"]:
            cfg = rm_config(recipe, params["run_dir"], rm, seed)
            source = Path(cfg.save_path).resolve()
            if not (source / "config.json").is_file():
                print(f"{source}: no trained RM (run the profile's notebook 02 first)", file=sys.stderr)
                return 1
            key = rm_key(cfg)
            target = store / key
            if (target / STORED_KEY).exists():
                print(f"{rm} seed {seed}: already stored as {key}")
                continue
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target)
            # beside the stored folder, where the store's links expect them
            for extra, stored in ((Path(cfg.metrics_path), rm_metrics_path(target)),
                                  (RunDir(params["run_dir"]).training_log(rm, seed), Path(str(target) + ".log"))):
                if extra.exists():
                    shutil.copyfile(extra.resolve(), stored)
            atomic_write_json(target / STORED_KEY, {"key": key, "training_fields": cfg.training_fields()})  # last: complete
            print(f"{rm} seed {seed}: stored as {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
