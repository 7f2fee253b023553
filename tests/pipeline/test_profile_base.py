"""A profile names its base and states only what differs: bases chain, and a cycle or a missing
base is one line naming the file, the field and the value."""

import pytest

from goalrm_core.pipeline.profile_files import load_profile


def write(directory, name, text):
    (directory / f"{name}.yaml").write_text(text)


def test_a_profile_is_its_base_with_its_own_values_on_top(tmp_path):
    write(tmp_path, "a", "x: 1\ny: 2\nz: [1, 2]\n")
    write(tmp_path, "b", "base: a\ny: 3\nw: true\n")
    write(tmp_path, "c", "base: b\nx: 0.5\n")
    assert load_profile("b", tmp_path) == {"x": 1, "y": 3, "z": [1, 2], "w": True}
    assert list(load_profile("b", tmp_path)) == ["x", "y", "z", "w"]  # the base's order, then the new keys
    assert load_profile("c", tmp_path) == {"x": 0.5, "y": 3, "z": [1, 2], "w": True}
    assert "base" not in load_profile("c", tmp_path)


@pytest.mark.parametrize(
    "files, message",
    [
        (
            {"a": "base: b\nx: 1\n", "b": "base: a\n"},
            r"/b\.yaml: field 'base' is 'a', which makes a cycle: a -> b -> a",
        ),
        ({"a": "base: a\n"}, r"a\.yaml: field 'base' is 'a', which makes a cycle: a -> a"),
        ({"a": "base: nowhere\n"}, r"a\.yaml: field 'base' is 'nowhere': unknown profile 'nowhere'"),
        ({"a": "base: [b]\n"}, r"a\.yaml: field 'base' must name a profile, got \['b'\]"),
        ({"a": "base: s\n", "s": "sweep:\n  profile: a\n"}, r"a\.yaml: field 'base' is 's': .*s\.yaml is a sweep spec"),
    ],
)
def test_a_bad_base_is_one_line_naming_file_field_and_value(tmp_path, files, message):
    for name, text in files.items():
        write(tmp_path, name, text)
    with pytest.raises(ValueError, match=message) as error:
        load_profile("a", tmp_path)
    assert "\n" not in str(error.value)


def test_the_notebook_profiles_inherit_from_the_demo_and_state_only_differences():
    from goalrm_core.pipeline.profile_files import profile_path, read_yaml

    demo = load_profile("demo")
    for name in ("smoke", "confident", "multidigit"):
        own = read_yaml(profile_path(name))
        assert own["base"] == "demo"
        repeated = sorted(k for k, v in own.items() if k != "base" and k in demo and demo[k] == v)
        assert repeated == [], f"params/{name}.yaml repeats the demo's {repeated}"
        assert set(load_profile(name)) == set(demo)
