"""The notebooks, executed through papermill under the smoke profile, record sane metrics; a second
run with the same seed records identical ones (timings live apart, in ``timings``)."""

import json
import re
import sys

import pytest

# the smoke run, and the session-scoped ``smoke_report`` fixture built on it, live in conftest.py:
# the browser test (test_report_browser.py) reads the same report
from conftest import smoke_run

from goalrm_core.paths import project_root, resolve_path
from goalrm_core.pipeline.profile_files import load_profile
from goalrm_core.study import step_bench

# one worker builds the shared smoke report and runs every test that reads it (make test runs two workers)
pytestmark = [pytest.mark.notebook]
BENCHES = {"toy-id", "toy-zero", "toy-times", "toy-unseen"}  # the smoke profile is a digit chain


def load_metrics(reports):
    return json.loads((reports / "metrics.json").read_text())


def test_report_succeeds_with_every_stage(smoke_report):
    code, reports, _ = smoke_report
    status = json.loads((reports / "status.json").read_text())
    assert code == 0, status
    notebooks = sorted(p.stem for p in resolve_path("notebooks").glob("[0-9][0-9]_*.ipynb"))
    for stem in notebooks:
        assert (reports / f"{stem}.html").exists() and (reports / f"{stem}.ipynb").exists()
    assert all(s["status"] == "ok" for s in status["stages"]), status
    index = (reports / "index.html").read_text()
    assert "All metrics" in index and "<h2>Summary</h2>" in index and "data:image/png;base64," in index
    # the length gate leads the page, whichever way it fell
    assert "the length-only scorer</b> on toy-id" in index
    assert index.index("length-only scorer") < index.index("<h2>Stages</h2>")


def test_data_metrics(smoke_report):
    _, reports, run_dir = smoke_report
    data = load_metrics(reports)["data"]
    assert set(data["benchmarks"]) == BENCHES
    for row in data["benchmarks"].values():
        smoke = load_profile("smoke")
        assert row["n_questions"] == smoke["n_benchmark_questions"]
        assert row["n_samples"] == smoke["n_benchmark_questions"] * smoke["n_samples"]
        assert 0.0 <= row["sample_accuracy"] <= 1.0
    # the smoke policy is tiny but must still be right sometimes, or no pairs can be formed
    assert data["benchmarks"]["toy-id"]["sample_accuracy"] > 0
    pref = data["preference"]
    assert pref["n_pairs"] > 10 and pref["n_pairs"] == pref["n_train"] + pref["n_eval"]
    assert (run_dir / "data" / "preference" / "train.jsonl").exists()


def test_training_representation_and_evaluation_metrics(smoke_report):
    _, reports, run_dir = smoke_report
    m = load_metrics(reports)
    for rm in ("baseline", "goal-conditioned"):
        assert 0.0 <= m["training"][rm]["eval_accuracy"] <= 1.0
        assert m["training"][rm]["steps"] == load_profile("smoke")["max_steps"]
        rep = m["representations"][rm]
        assert -1.0 <= rep["cos_correct_mean"] <= 1.0 and -1.0 <= rep["cos_incorrect_mean"] <= 1.0
        detail = load_profile("smoke")["rm_seeds"][0]  # not 0: the detail tables follow the profile's first seed
        assert (run_dir / "representations" / f"{rm}-seed{detail}" / "goal_state.npy").exists()
        assert not (run_dir / "representations" / f"{rm}-seed0").exists()
        toy_id = m["evaluation"][rm]["toy-id"]
        auroc = toy_id["auroc"]
        assert auroc is None or toy_id["auroc_ci_low"] <= auroc <= toy_id["auroc_ci_high"]
        assert set(toy_id["partial_auroc"]) == {f"{0.1 * i:.1f}" for i in range(11)}
        assert 0.0 <= toy_id["filter"]["tokens_saved_pct"] <= 100.0
    assert set(m["evaluation"]["delta_auroc"]) == BENCHES
    assert "length only" in m["evaluation"]
    gate = m["evaluation"]["gate"]
    length = gate["length_only"]["auroc"]
    assert gate["passed"] == all(gate[rm]["auroc"] > length for rm in ("baseline", "goal-conditioned"))
    assert m["evaluation"]["headline"] == "sample0"
    assert set(m["evaluation"]["seeds"]["baseline"]) == BENCHES
    steps = m["evaluation"][
        "step_verifiers"
    ]  # the step-verifier bench: every figure, every RM's two readings, the policy
    assert steps["reference"] == "baseline partial reward" and set(steps["figures"]) == set(step_bench.METRICS)
    assert {
        "goal-conditioned Q",
        "baseline partial reward",
        "policy log-prob",
        "goal-conditioned Q − baseline partial reward",
    } <= set(steps["figures"]["f1"])


def test_same_seed_gives_identical_metrics(request, tmp_path_factory):
    code, reports, _ = smoke_run(tmp_path_factory, "second")  # first: another worker may be building the shared one
    assert code == 0
    first, second = load_metrics(request.getfixturevalue("smoke_report")[1]), load_metrics(reports)
    for key in ("timings", "provenance"):  # wall-clock times, the date and the idle cores differ
        first.pop(key), second.pop(key)
    assert first == second


def test_decoding_metrics(smoke_report):
    _, reports, _ = smoke_report
    decoding = load_metrics(reports)["decoding"]
    for bench, methods in decoding["methods"].items():
        assert bench in BENCHES
        for row in methods.values():
            assert 0.0 <= row["accuracy"] <= 1.0 and row["tokens"] >= 0
    for row in decoding["pruning"].values():
        assert row["tokens_generated"] <= row["tokens_generated_unpruned"]
        assert 0.0 <= row["accuracy"] <= 1.0 and 0.0 <= row["accuracy_unpruned"] <= 1.0
    steering = decoding["steering"]
    assert 0.0 <= steering["attribute_rate"] <= 1.0 and 0.0 <= steering["attribute_rate_unguided"] <= 1.0


# What a reader must never meet on a report page. Prose may say "warning"; these are machine forms.
NOISE = {
    "progress bar": re.compile(r"it/s\]|s/it\]|cell/s|Loading weights|Writing model shards"),
    "Python warning": re.compile(r"\b\w+Warning:"),
    "logging WARNING record": re.compile(r"\bWARNING\b"),
    "traceback": re.compile(r"Traceback"),  # every smoke stage succeeds
}


def test_pages_are_clean(smoke_report):
    """No progress bar, warning, log record, traceback or machine path on any page of the report."""
    _, reports, _ = smoke_report
    pages = sorted(reports.glob("*.html"))
    assert len(pages) == len(list(resolve_path("notebooks").glob("[0-9][0-9]_*.ipynb"))) + 1
    paths = {"project root": str(project_root()), "virtual environment": sys.prefix}
    found = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for what, pattern in NOISE.items():
            for match in pattern.finditer(text):
                found.append(f"{page.name}: {what}: ...{text[max(0, match.start() - 80) : match.end() + 80]!r}...")
        for what, path in paths.items():
            if path in text:
                at = text.index(path)
                found.append(f"{page.name}: {what} path: ...{text[max(0, at - 80) : at + 120]!r}...")
    assert not found, "\n".join(found[:20])


def _raw_reprs(reports, names):
    from goalrm_core.report.pages import raw_outputs

    return [
        f"{page.name}: {line}"
        for page in sorted(reports.glob("*.html"))
        if page.stem in names
        for line in raw_outputs(page.read_text(encoding="utf-8"))
    ]


SHOWN_CLEAN = ("01_data", "02_training", "03_representations", "04_evaluation", "05_decoding", "index")


def test_pages_show_no_raw_reprs(smoke_report):
    """No config or object repr, pandas Series or index, bare dict/tuple/list/string/path, or None
    cell on the smoke report's pages (``pages.raw_outputs``, the reader's check)."""
    _, reports, _ = smoke_report
    found = _raw_reprs(reports, SHOWN_CLEAN)
    assert not found, "\n".join(found[:20])


def test_stage_logs_hold_what_the_pages_leave_out(smoke_report):
    """papermill's progress and log records go to runs/<profile>/logs/<stage>.log, one per stage."""
    _, reports, run_dir = smoke_report
    status = json.loads((reports / "status.json").read_text())
    for stage in status["stages"]:
        log = run_dir / "logs" / f"{stage['name']}.log"
        text = log.read_text(encoding="utf-8")
        assert "cell/s" in text and "papermill" in text, text[:500]
        assert stage["log"].endswith(f"logs/{stage['name']}.log")


def test_metrics_record_provenance(smoke_report):
    _, reports, _ = smoke_report
    prov = load_metrics(reports)["provenance"]
    assert prov["profile"]["name"] == "smoke"
    assert prov["profile"]["parameters"]["torch_threads"] == 1 == prov["threads"]["used"]
    assert prov["profile"]["parameters"]["max_steps"] == load_profile("smoke")["max_steps"]
    assert set(prov["versions"]) >= {"torch", "transformers", "deepspeed", "papermill"}
    assert all(prov["versions"][p] for p in ("torch", "transformers", "deepspeed", "papermill"))
    assert prov["machine"]["cores"] >= 1 and prov["date"]
    assert set(prov["git"]) == {"commit", "dirty", "dirty_excludes"}


def test_recorded_numbers_are_reproduced_from_the_scored_files(smoke_report):
    """The report's numbers are what the run's files give, recomputed here without the study code:
    each RM's AUROC over both classes of its headline rows, its filtered vote from its sampled rows,
    and the tokens pruning saved from the tokens it generated."""
    from sklearn.metrics import roc_auc_score

    from goalrm_core.data.questions import group_by_question
    from goalrm_core.data.rundir import RunDir
    from goalrm_core.evaluation import metrics
    from goalrm_core.evaluation.tables import read_scored

    _, reports, run_dir = smoke_report
    m = load_metrics(reports)
    profile = load_profile("smoke")
    detail = profile["rm_seeds"][0]  # the recorded per-RM rows are the detail seed's
    for rm in ("baseline", "goal-conditioned"):
        rows = read_scored(RunDir(run_dir).eval(rm, detail), "toy-id", "all")
        headline = [r for r in rows if r["sample_index"] == 0]  # the smoke profile's headline is sample0
        labels = [bool(r["is_correct"]) for r in headline]
        assert 0 < sum(labels) < len(labels)  # both classes, or AUROC would mean nothing
        recorded = m["evaluation"][rm]["toy-id"]
        assert recorded["auroc"] == pytest.approx(roc_auc_score(labels, [r["reward"] for r in headline]), abs=1e-12)
        vote = metrics.q_filtered_majority_vote(
            list(group_by_question(rows).values()), profile["filter_threshold"], profile["skip_first"]
        )
        assert (
            recorded["filter"]["accuracy"] == vote.accuracy
            and recorded["filter"]["tokens_saved_pct"] == vote.tokens_saved_pct
        )
    for bench, row in m["decoding"]["pruning"].items():
        saved = row["tokens_generated_unpruned"] - row["tokens_generated"]
        assert row["tokens_saved_pct"] == pytest.approx(100 * saved / row["tokens_generated_unpruned"]), bench
