"""What ``--load_checkpoint`` needs from a checkpoint's client state: a checkpoint another program
wrote (or an older one) is named in one line, never a raw KeyError."""

from goalrm_core.train.trainer import CLIENT_KEYS, SCHEDULE_KEYS, _missing_client_keys


def complete():
    return {"step": 3, "rng": [{"python": None}], "schedule": {k: 1 for k in SCHEDULE_KEYS}, "epoch": 0}


def test_a_checkpoint_this_trainer_wrote_lacks_nothing():
    assert _missing_client_keys(complete()) == []


def test_each_missing_key_is_named():
    for key in CLIENT_KEYS:
        client = complete()
        del client[key]
        assert _missing_client_keys(client) == [key]
    for key in SCHEDULE_KEYS:
        client = complete()
        del client["schedule"][key]
        assert _missing_client_keys(client) == [f"schedule.{key}"]


def test_malformed_client_states_are_named():
    assert _missing_client_keys(None) == list(CLIENT_KEYS)  # DeepSpeed returns no client state
    assert _missing_client_keys({**complete(), "schedule": 5}) == ["schedule (not a mapping)"]
    assert _missing_client_keys({**complete(), "rng": []}) == ["rng (no state per rank)"]
