"""The install routes the README names lead to working next commands: the extras cover the pinned requirements, and
`book html` without the site extra says in one line what to install."""
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from transformer_lib.book import cli

ROOT = Path(__file__).resolve().parents[1]


def pins() -> dict[str, str]:
    """requirements.txt's pinned packages: {normalized name: version}."""
    found = {}
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-e"):
            continue
        name, version = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line).groups()
        found[canonicalize_name(name)] = version
    return found


def extras() -> tuple[list[str], dict[str, list[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project["dependencies"], project["optional-dependencies"]


def expanded(name: str, optional: dict[str, list[str]]) -> list[Requirement]:
    """An extra's requirements, with the project's own extras it names (`transformer-book[a,b]`) opened."""
    found = []
    for text in optional[name]:
        req = Requirement(text)
        if canonicalize_name(req.name) == "transformer-book":
            for inner in sorted(req.extras):
                found += expanded(inner, optional)
        else:
            found.append(req)
    return found


def test_the_all_extra_installs_every_pinned_requirement_in_a_range_the_pin_meets():
    """`pip install -e ".[all]"` gives every command of the README what requirements.txt gives it."""
    base, optional = extras()
    wanted = {canonicalize_name(r.name): r for r in [Requirement(t) for t in base] + expanded("all", optional)}
    pinned = pins()
    # installed by matplotlib, torch and jupyter-book; pinned so that CI's versions are the reader's
    indirect = {"pillow", "numpy", "sphinx", "myst-nb", "myst-parser"}
    missing = sorted(set(pinned) - set(wanted) - indirect)
    assert missing == [], f"pinned in requirements.txt but in no extra of pyproject.toml: {missing}"
    for name, req in wanted.items():
        if name in pinned:
            assert req.specifier.contains(pinned[name], prereleases=True), (name, str(req.specifier), pinned[name])


def test_each_extra_the_readme_names_exists():
    _, optional = extras()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r'\.\[([a-z,]+)\]', readme))
    assert named, "the README names no extra"
    for group in named:
        for extra in group.split(","):
            assert extra in optional, f"README names the extra {extra!r}, which pyproject.toml does not define"


def test_book_html_without_the_site_extra_says_what_to_install_in_one_line(monkeypatch, capsys, tmp_path):
    from importlib import metadata

    assert cli.missing_site_packages() == []  # requirements.txt installs them all
    real = metadata.version

    def version(name):
        if name == "pydata-sphinx-theme":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", version)
    assert cli.main(["html", "--out", str(tmp_path / "site")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no pydata-sphinx-theme" in err and "pip install -e '.[site]'" in err, err
    assert not (tmp_path / "site").exists()


def test_the_site_packages_the_html_command_asks_for_are_the_site_extras():
    """What `book html` checks for is what the site extra installs (and what it pulls in: Sphinx, MyST)."""
    _, optional = extras()
    site = {canonicalize_name(Requirement(t).name) for t in optional["site"]}
    assert site <= {canonicalize_name(n) for n in cli.SITE_PACKAGES}


def test_the_readme_asks_for_the_python_pyproject_requires():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (version,) = re.fullmatch(r">=(3\.\d+)", project["requires-python"]).groups()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"Python {version} or newer" in readme
    assert set(re.findall(r"Python (3\.\d+)", readme)) == {version}


def test_the_readme_is_read_forward_in_at_most_1500_words():
    """The rest lives in docs/ (docs/chapters.md holds the chapters at length)."""
    words = len((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert words <= 1500, f"README.md has {words} words; move detail to docs/"
