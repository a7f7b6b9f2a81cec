"""A schema drafted from private rows keeps its flag through every round trip until a review clears
it; a DP draft's note does not mark it private nor travel into the fingerprint."""

import json
import warnings

import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError
from privsyn_fed.schema import PrivateDraftWarning
from privsyn_fed.schema.draft import DRAFT_NOTE_KEY


def _private_draft():
    df = pd.DataFrame({"age": [23, 35, 47, 51, 62], "sex": ["F", "M", "F", "F", "M"]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivateDraftWarning)
        return df, pf.Schema.draft(df)


def _refused(schema, df):
    with pytest.raises(InputError, match="drafted from private rows"):
        pf.synthesize([df], schema=schema, method="independent", epsilon=1.0, delta=1e-9)


def test_a_private_draft_keeps_its_flag_through_every_round_trip(tmp_path):
    df, drafted = _private_draft()
    assert drafted.private_draft and drafted.to_dict()[DRAFT_NOTE_KEY]["privacy"].startswith("none")
    trips = {
        "dict": pf.Schema.from_dict(drafted.to_dict()),
        "json text": pf.Schema.from_dict(json.loads(json.dumps(drafted.to_dict()))),
    }
    for name in ("s.json", "s.yaml"):
        drafted.save(tmp_path / name)
        trips[name] = pf.Schema.load(tmp_path / name)
    (tmp_path / "dumped.json").write_text(json.dumps(drafted.to_dict()))  # what a user writes by hand
    trips["json.dumps to a file"] = pf.Schema.load(tmp_path / "dumped.json")
    trips["twice"] = pf.Schema.from_dict(pf.Schema.from_dict(drafted.to_dict()).to_dict())
    for name, schema in trips.items():
        assert schema.private_draft, name
        assert schema.to_dict() == drafted.to_dict(), name  # the note itself, unchanged
        assert schema.reviewed().to_dict() == drafted.reviewed().to_dict(), name
    _refused(trips["json.dumps to a file"], df)
    # only a review clears it: reviewed(), or the note deleted from the file
    reviewed = drafted.reviewed()
    assert not reviewed.private_draft and DRAFT_NOTE_KEY not in reviewed.to_dict()
    assert not pf.Schema.from_dict(reviewed.to_dict()).private_draft
    document = json.loads((tmp_path / "s.json").read_text())
    del document[DRAFT_NOTE_KEY]
    assert not pf.Schema.from_dict(document).private_draft


def test_a_dp_drafts_note_does_not_mark_it_private_nor_travel_into_the_fingerprint():
    note = {"privacy": "differential privacy", "note": "reviewed under DP"}
    schema = pf.Schema.from_dict(
        {DRAFT_NOTE_KEY: note, "columns": [{"name": "a", "type": "categorical", "categories": ["x"]}]}
    )
    assert not schema.private_draft and DRAFT_NOTE_KEY not in schema.to_dict()
