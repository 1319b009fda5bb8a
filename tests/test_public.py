"""What a public course carries beside its chapters: a license, a citation, a CI workflow, and no Multi30k."""
import re
import subprocess
from pathlib import Path

import yaml

import transformer_lib
import transformer_lib.book as bk
from transformer_lib.multi30k import MULTI30K_FILES, MULTI30K_URL

ROOT = Path(__file__).resolve().parents[1]


def test_the_license_covers_code_and_prose_and_leaves_multi30k_out():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "MIT License" in text and "Permission is hereby granted, free of charge" in text
    assert "Creative Commons Attribution 4.0 International (CC BY 4.0)" in text
    assert "Multi30k corpus is not part of this repository" in text
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'license = "MIT AND CC-BY-4.0"' in pyproject and 'license-files = ["LICENSE"]' in pyproject


def test_the_citation_names_this_book_its_repository_and_version():
    cff, book = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8")), bk.load_book(ROOT)
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["title"] == book.title
    assert cff["repository-code"] == f"https://github.com/{book.repository}"
    assert cff["version"] == transformer_lib.__version__
    assert re.search(rf'^version = "{re.escape(transformer_lib.__version__)}"$',
                     (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert cff["authors"] and all(set(a) & {"name", "family-names"} for a in cff["authors"])


def test_the_github_workflow_runs_ci_run_with_verified_multi30k_beside_the_checkout():
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8"))
    steps = flow["jobs"]["ci"]["steps"]
    checkout = next(s for s in steps if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["path"] == "book"  # so that ../shared, where .ci/run looks, sits beside it
    assert steps[-1]["run"].strip() == "book/.ci/run"
    fetch = next(s["run"] for s in steps if "sha256sum -c" in s.get("run", ""))
    assert "mkdir -p shared/data/multi30k" in fetch and MULTI30K_URL + "$name" in fetch
    listed = dict(line.split()[::-1] for line in fetch.splitlines() if re.fullmatch(r"[0-9a-f]{64} \S+", line.strip()))
    assert listed == {name: digest for pair in MULTI30K_FILES.values() for name, digest in pair}
    assert "ubuntu" in flow["jobs"]["ci"]["runs-on"] and flow["jobs"]["ci"]["timeout-minutes"] <= 90
    assert flow.get("on", flow.get(True))["push"]["branches"] == [bk.load_book(ROOT).branch]


def test_no_multi30k_file_is_committed():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    names = {name for pair in MULTI30K_FILES.values() for name, _ in pair}
    assert not [path for path in tracked if Path(path).name in names or Path(path).name.removesuffix(".gz") in
                {n.removesuffix(".gz") for n in names}]
