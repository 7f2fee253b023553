"""The result sections of a report's ``index.html``, built from ``metrics.json`` alone.

In reading order: a summary generated from the numbers (so it is honest whichever way they fall),
the key figure (AUROC per benchmark for every scorer), the key table (goal-conditioned − baseline),
a figure of accuracy against generated tokens (Q-filtered voting, online pruning) and the decoding
comparison at matched budgets. Figures are embedded PNGs, so the page works as a single file.
Every section is left out when the metrics it needs are absent (a run that stopped early).
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping
from typing import Any

from goalrm_core.evaluation.tables import REFERENCE_SCORERS
from goalrm_core.study import formatting as fmt
from goalrm_core.study.rms import RMS
from goalrm_core.study import plots
REFERENCES = tuple(REFERENCE_SCORERS)
ID_BENCH = "toy-id"
HEADLINE_SETS = {"sample0": "one sampled solution per question", "greedy": "one greedy solution per question"}


def _get(tree: Any, *keys, default=None):
    for key in keys:
        if not isinstance(tree, Mapping) or key not in tree:
            return default
        tree = tree[key]
    return tree


def _benches(ev: Mapping) -> list[str]:
    benches = list(_get(ev, "delta_auroc", default={}) or _get(ev, RMS[0], default={}))
    return sorted(benches, key=lambda b: (b != ID_BENCH, b))


def _auroc(ev: Mapping, scorer: str, bench: str) -> tuple[Any, Any, Any]:
    row = _get(ev, scorer, bench, default={})
    return row.get("auroc"), row.get("auroc_ci_low"), row.get("auroc_ci_high")


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _table(df) -> str:
    return df.to_html(index=False, escape=True, border=0, na_rep="–")


# ------------------------------------------------------------------------------------- summary


def summary(metrics: Mapping) -> str:
    """3-5 sentences from the numbers: what was trained, how both RMs rank generations against the
    free scorers, and whether the goal-conditioned RM beat the baseline (paired Δ with CI)."""
    ev, training, data = metrics.get("evaluation", {}), metrics.get("training", {}), metrics.get("data", {})
    if not all(rm in ev for rm in RMS):
        return ""
    e = html.escape
    sentences = []
    task = _get(data, "task", "name", default="ToyMath")
    seeds = {_get(training, rm, "n_seeds") for rm in RMS} - {None}
    steps = {_get(training, rm, "steps") for rm in RMS} - {None}
    pairs = _get(data, "preference", "n_train")
    trained = "Two reward models, a baseline (pairwise loss) and a goal-conditioned one (pairwise + contrastive term),"
    detail = []
    if seeds:
        detail.append(f"{'/'.join(map(str, sorted(seeds)))} seed{'s' if max(seeds) > 1 else ''} each")
    if steps:
        detail.append(f"{'/'.join(map(str, sorted(steps)))} steps")
    on = f" on {pairs:,} preference pairs of the policy's own {task} solutions" if pairs else f" on {task}"
    acc = {rm: _get(training, rm, "eval_accuracy") for rm in RMS}
    if all(v is not None for v in acc.values()):
        detail.append(f"held-out pairwise accuracy {fmt.pct(acc['baseline'])} and {fmt.pct(acc['goal-conditioned'])}")
    sentences.append(f"{trained} were trained{on}" + (f" ({'; '.join(detail)})." if detail else "."))
    bench = ID_BENCH if ID_BENCH in _get(ev, RMS[0], default={}) else (_benches(ev) or [None])[0]
    if bench:
        which = HEADLINE_SETS.get(ev.get("headline"), "the headline generations")
        base, goal = (fmt.ci(*_auroc(ev, rm, bench)) for rm in RMS)
        text = f"On {bench} ({which}), the baseline RM ranks correct above incorrect solutions with AUROC {base} and the goal-conditioned RM with {goal}"
        if "length only" in ev:
            text += f"; response length alone scores {fmt.ci(*_auroc(ev, 'length only', bench))}"
        sentences.append(text + ".")
        logprob = _auroc(ev, "policy mean logprob", bench)[0]
        best_rm = max((v for v in (_auroc(ev, rm, bench)[0] for rm in RMS) if v is not None), default=None)
        if logprob is not None and best_rm is not None and logprob > best_rm:
            sentences.append(f"The policy's own mean log-prob does better than either RM ({fmt.ci(*_auroc(ev, 'policy mean logprob', bench))}): "
                             "its slips are its own unlikely tokens, so on this task it is a ceiling, not a competitor.")
    deltas = ev.get("delta_auroc", {})
    if deltas:
        better = [b for b, d in deltas.items() if d.get("ci_low") is not None and d["ci_low"] > 0]
        worse = [b for b, d in deltas.items() if d.get("ci_high") is not None and d["ci_high"] < 0]
        per_bench = ", ".join(f"{b} {fmt.signed_ci(d.get('mean'), d.get('ci_low'), d.get('ci_high'))}"
                              for b, d in sorted(deltas.items(), key=lambda kv: (kv[0] != ID_BENCH, kv[0])))
        head = f"Goal-conditioned minus baseline AUROC (paired, 95% CI): {per_bench}; "
        if not better and not worse:
            verdict = f"the CI includes 0 on all {len(deltas)} benchmarks: no detectable difference."
        else:
            parts = []
            if better:
                parts.append(f"better on {', '.join(better)}")
            if worse:
                parts.append(f"worse on {', '.join(worse)}")
            rest = len(deltas) - len(better) - len(worse)
            verdict = (f"the CI excludes 0 on {len(better) + len(worse)} of {len(deltas)} benchmarks: the goal-conditioned RM is "
                       f"{' and '.join(parts)}" + (f", indistinguishable on the other {rest}." if rest else "."))
        sentences.append(head + verdict)
    return "<p>" + " ".join(e(s) for s in sentences) + "</p>"


# ------------------------------------------------------------------------------------- figures


def auroc_frame(ev: Mapping):
    import pandas as pd

    rows = []
    for scorer in [*RMS, *REFERENCES]:
        for bench in _benches(ev):
            auroc, low, high = _auroc(ev, scorer, bench)
            if auroc is not None:
                rows.append({"scorer": scorer, "benchmark": bench, "auroc": auroc,
                             "ci_low": auroc if low is None else low, "ci_high": auroc if high is None else high})
    return pd.DataFrame(rows)


def auroc_figure(metrics: Mapping) -> str:
    ev = metrics.get("evaluation", {})
    frame = auroc_frame(ev)
    if frame.empty:
        return ""
    which = HEADLINE_SETS.get(ev.get("headline"), "headline generations")
    return ("<p>How well each scorer ranks correct above incorrect solutions (AUROC, 0.5 = chance) on every "
            f"benchmark, {html.escape(which)}, seed-0 RMs; bars are 95% bootstrap CIs over questions. The free "
            "reference scorers stand beside the RMs: a reward model is only interesting where it beats response "
            "length.</p>" + _png(plots.auroc_bars(frame, title="AUROC per benchmark (95% CI)")))


def delta_table(metrics: Mapping) -> str:
    import pandas as pd

    deltas = _get(metrics, "evaluation", "delta_auroc", default={})
    if not deltas:
        return ""
    ev = metrics["evaluation"]
    rows = [{"benchmark": b, "baseline": fmt.ci(*_auroc(ev, "baseline", b)),
             "goal-conditioned": fmt.ci(*_auroc(ev, "goal-conditioned", b)),
             "Δ AUROC [95% CI]": fmt.signed_ci(d.get("mean"), d.get("ci_low"), d.get("ci_high")),
             "p-value": fmt.p_value(d.get("p_value"))}
            for b in _benches(ev) if (d := deltas.get(b))]
    return ("<p>The paired difference on the same generations (goal-conditioned − baseline), bootstrapped over "
            "questions; a CI that contains 0 means no detectable difference at this sample size.</p>"
            + _table(pd.DataFrame(rows)))


def savings_figure(metrics: Mapping) -> str:
    import pandas as pd

    ev, dec = metrics.get("evaluation", {}), metrics.get("decoding", {})
    rows = []
    for bench in _benches(ev):
        f = _get(ev, "goal-conditioned", bench, "filter")
        if f and f.get("accuracy") is not None:
            rows.append({"method": "Q-filtered voting", "benchmark": bench, "tokens": 1.0, "accuracy": f["accuracy_unfiltered"], "end": False})
            rows.append({"method": "Q-filtered voting", "benchmark": bench, "tokens": 1 - f["tokens_saved_pct"] / 100, "accuracy": f["accuracy"], "end": True})
        p = _get(dec, "pruning", bench)
        if p and p.get("tokens_generated_unpruned"):
            rows.append({"method": "online pruning", "benchmark": bench, "tokens": 1.0, "accuracy": p["accuracy_unpruned"], "end": False})
            rows.append({"method": "online pruning", "benchmark": bench, "tokens": p["tokens_generated"] / p["tokens_generated_unpruned"],
                         "accuracy": p["accuracy"], "end": True})
    if not rows:
        return ""
    return ("<p>What the goal-conditioned RM's Q-values save: majority-vote accuracy against the tokens generated, "
            "relative to using every sample in full (x = 1). Each line runs from the unfiltered vote (open circle) "
            "to the filtered or pruned one (dot); left is cheaper, up is more accurate.</p>"
            + _png(plots.savings_panels(pd.DataFrame(rows))))


def decoding_table(metrics: Mapping) -> str:
    import pandas as pd

    methods = _get(metrics, "decoding", "methods", default={})
    if not methods:
        return ""
    benches = sorted(methods, key=lambda b: (b != ID_BENCH, b))
    names = list(dict.fromkeys(m for b in benches for m in methods[b]))
    rows = []
    for name in names:
        row = {"method": name.replace("_", " ")}
        for b in benches:
            r = methods[b].get(name)
            row[b] = "–" if r is None else f"{fmt.pct(r['accuracy'])} ({r['tokens']:.0f} tok, N={r['n']})"
        rows.append(row)
    return ("<p>Q-guided beam search against greedy decoding, majority voting and best-of-N at the smallest N whose "
            "token budget reaches the beam search's: accuracy (generated tokens per question, N).</p>"
            + _table(pd.DataFrame(rows)))


def result_sections(metrics: Mapping) -> str:
    """Everything between the gate and the stage table."""
    parts = [("Summary", summary(metrics)), ("Reward models against the free scorers", auroc_figure(metrics)),
             ("Goal-conditioned − baseline", delta_table(metrics)), ("Tokens saved by Q", savings_figure(metrics)),
             ("Decoding at matched budgets", decoding_table(metrics))]
    return "\n".join(f"<h2>{html.escape(title)}</h2>\n{body}" for title, body in parts if body)
