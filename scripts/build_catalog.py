"""Regenerate wyoming_pocket_tts/engine/catalog.json from an installed pocket-tts.

The catalog keeps only the facts of each released config (dimensions, hub paths,
revisions, text flags) as JSON; run this after upgrading the upstream oracle:

    python scripts/build_catalog.py
"""

import json
import logging
from pathlib import Path

import pocket_tts
import yaml

CATALOG = Path(__file__).resolve().parent.parent / "wyoming_pocket_tts" / "engine" / "catalog.json"


def main() -> None:
    configs_dir = Path(pocket_tts.__file__).parent / "config"
    entries = {path.stem: yaml.safe_load(path.read_text(encoding="utf-8"))
               for path in sorted(configs_dir.glob("*.yaml"))}
    CATALOG.write_text(json.dumps(entries, indent=1, ensure_ascii=False, sort_keys=True) + "\n",
                       encoding="utf-8")
    logging.getLogger(__name__).info("wrote %d configs to %s", len(entries), CATALOG)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
