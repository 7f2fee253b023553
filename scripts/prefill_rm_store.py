"""Put a finished run's RMs into an RM store under their keys, so that a rerun whose data stage writes
the same bytes takes them from the store instead of training them again.

    python scripts/prefill_rm_store.py --profile demo --store runs/demo-threads1/rm-store

The rerun must set ``rm_store`` to the same folder. An RM's key (``train.store.rm_key``) is its
training config with the policy and the preference pairs by content, so the rerun reuses an RM only
where its own data stage wrote byte-identical policy and pairs; anything else is trained as usual.
The reuse is sound only where the rerun's training would be the same computation: each training
process gets ``torch_threads // rm_parallel`` threads, 1 in the demo at 1 or 2 threads. The
reproducibility rerun at one thread uses this.
"""

from __future__ import annotations

import argparse
import sys

from goalrm_core.data.rundir import RunDir
from goalrm_core.pipeline.profile_files import load_profile
from goalrm_core.study.rms import RMS
from goalrm_core.study.training import notebook_recipe, rm_config
from goalrm_core.train.store import store_trained_rm


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="demo", help="params/<profile>.yaml: the run's recipe, seeds and run_dir")
    parser.add_argument("--store", required=True, help="the RM store the rerun names as rm_store")
    args = parser.parse_args(argv)
    params = load_profile(args.profile)
    recipe = notebook_recipe(params)
    for rm in RMS:
        for seed in params["rm_seeds"]:
            cfg = rm_config(recipe, params["run_dir"], rm, seed)
            try:
                key, already = store_trained_rm(cfg, args.store, log=RunDir(params["run_dir"]).training_log(rm, seed))
            except FileNotFoundError as e:
                print(f"prefill_rm_store: {e}", file=sys.stderr)
                return 1
            print(f"{rm} seed {seed}: {'already stored' if already else 'stored'} as {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
