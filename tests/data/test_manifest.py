"""Finished-or-absent output folders: the in-progress marker, the manifest, and what a reader refuses."""

import pytest

from goalrm_core.data import manifest
from goalrm_core.data.io import ArtifactError, write_jsonl


def test_a_folder_being_written_is_refused_and_a_finished_one_is_read(tmp_path):
    out = manifest.begin(tmp_path / "eval", command="goalrm eval-rm --save_dir eval")
    write_jsonl(out / "b" / "all" / "scored.jsonl", [{"x": 1}, {"x": 2}])
    with pytest.raises(ArtifactError, match=r"incomplete .*goalrm eval-rm --save_dir eval"):
        manifest.check(out)
    m = manifest.finish(out, {"b/all/scored.jsonl": 2}, command="goalrm eval-rm --save_dir eval", producer={"rm": "x"})
    assert not (out / manifest.IN_PROGRESS).exists()
    assert manifest.check(out) == m and m["outputs"]["b/all/scored.jsonl"]["rows"] == 2


def test_a_changed_or_duplicated_output_is_refused(tmp_path):
    out = manifest.begin(tmp_path / "eval")
    path = out / "scored.jsonl"
    write_jsonl(path, [{"x": 1}, {"x": 2}])
    manifest.finish(out, {"scored.jsonl": 2})
    path.write_text(path.read_text() * 2)  # a bad concatenation: identical rows, twice as many
    with pytest.raises(ArtifactError, match=r"changed since .* \(4 rows, the manifest says 2\)"):
        manifest.check(out)
    path.unlink()
    with pytest.raises(ArtifactError, match="missing"):
        manifest.check(out)


def test_a_rerun_forgets_the_old_manifest_until_it_finishes(tmp_path):
    out = manifest.begin(tmp_path / "eval")
    manifest.finish(out, {})
    manifest.begin(out)
    assert not (out / manifest.MANIFEST).exists()
    with pytest.raises(ArtifactError, match="incomplete"):
        manifest.check(out)


def test_a_folder_from_other_software_is_read_with_a_notice(tmp_path):
    notes = []
    assert manifest.check(tmp_path, notice=notes.append) is None
    assert len(notes) == 1 and "no manifest.json" in notes[0]


def test_config_hash_tells_rms_apart(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, lr in ((a, 1e-3), (b, 2e-3)):
        folder.mkdir()
        (folder / "config.json").write_text('{"hidden_size": 8}')
        (folder / "goalrm.json").write_text(f'{{"training_args": {{"learning_rate": {lr}}}}}')
    assert manifest.config_hash(a) != manifest.config_hash(b) and manifest.config_hash(a) == manifest.config_hash(a)


def test_a_file_is_vouched_for_only_by_a_manifest_that_lists_it(tmp_path):
    folder = manifest.begin(tmp_path / "rep")
    (folder / "goal_state.npy").write_bytes(b"one")
    with pytest.raises(ArtifactError, match="incomplete"):
        manifest.check_file(folder / "goal_state.npy")
    made = manifest.finish(folder, {"goal_state.npy": None}, producer={"config_hash": "abc"})
    assert manifest.check_file(folder / "goal_state.npy") == made
    (folder / "other.npy").write_bytes(b"not ours")
    assert manifest.check_file(folder / "other.npy") is None  # placed beside a finished run: nothing speaks for it
    assert manifest.check_file(tmp_path / "loose.npy") is None  # no manifest at all
    (folder / "goal_state.npy").write_bytes(b"two")
    with pytest.raises(ArtifactError, match="changed since"):
        manifest.check_file(folder / "goal_state.npy")


def test_the_command_line_of_a_writer_is_quoted_so_it_can_be_run_again():
    assert (
        manifest.command_line("goalrm eval-rm", ["--save_dir", "my eval", "--benchmarks", "gsm8k"])
        == "goalrm eval-rm --save_dir 'my eval' --benchmarks gsm8k"
    )


def test_a_rerun_keeps_every_earlier_run_in_the_history(tmp_path):
    out = manifest.begin(tmp_path / "rep", command="first")
    (out / "a.npy").write_bytes(b"a")
    (out / "shared.npy").write_bytes(b"1")
    manifest.finish(out, {"a.npy": None, "shared.npy": None}, command="first", producer={"config_hash": "A"})
    manifest.begin(out, command="interrupted")  # a run that never finished: it vouches for nothing, hides nothing
    manifest.begin(out, command="second")
    (out / "b.npy").write_bytes(b"b")
    (out / "shared.npy").write_bytes(b"2")
    m = manifest.finish(out, {"b.npy": None, "shared.npy": None}, command="second", producer={"config_hash": "B"})
    assert [h["command"] for h in m["history"]] == ["first"]
    assert manifest.check_file(out / "a.npy")["producer"] == {
        "config_hash": "A"
    }  # the first run's, not hidden by the second
    assert manifest.check_file(out / "shared.npy")["producer"] == {"config_hash": "B"}  # rewritten: the second run's
    assert manifest.check_file(out / "b.npy")["producer"] == {"config_hash": "B"}
    manifest.begin(out, command="third")
    m = manifest.finish(out, {}, command="third")
    assert [h["command"] for h in m["history"]] == ["first", "second"]
    assert manifest.check_file(out / "a.npy")["producer"] == {"config_hash": "A"}
