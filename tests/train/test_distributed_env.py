"""The C++ extension cache DeepSpeed builds its CPU communication op in: one per Python environment."""

import sys

from goalrm_core.train.distributed import own_extensions_dir


def test_each_environment_gets_its_own_extension_folder_unless_one_is_set(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = own_extensions_dir()
    assert first.startswith(str(tmp_path / "torch_extensions" / "env-"))
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR")
    monkeypatch.setattr(sys, "prefix", "/somewhere/else/.venv")
    assert own_extensions_dir() != first  # another environment, another folder
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", "/chosen")
    assert own_extensions_dir() == "/chosen"  # a user's choice stands
