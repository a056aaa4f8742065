"""The repository stands alone: no tracked file names a path outside it (the build machine's
absolute paths, a `shared/` folder beside the clone), and what the suite and `kiln eval` read
ships with it. A fresh clone in an empty folder must pass the suite."""
import hashlib
import re
import subprocess

from kiln_server import REPO

# Written in pieces so that this file does not match itself.
OUTSIDE = re.compile("|".join([
    r"\.\./" + "shared",                       # the folder beside a developer's clone
    r"(?<![\w.-])" + "shared/" + r"(data|tools|notes)\b",
    r"(?<![\w/.-])/" + "work/",                # the build machine's absolute checkout path
    r"(?<![\w/.-])/(home/[a-z_][\w-]*|" + "root)/",
    r"/\s*[\"']" + "shared" + r"[\"']",  # a path joined in code (ROOT.parent, then that folder)
]))


def tracked_files():
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True)
    return [REPO / p for p in out.stdout.decode().split("\0") if p]


def test_no_tracked_file_names_a_path_outside_the_repository():
    hits = []
    for path in tracked_files():
        if not path.is_file() or path.stat().st_size > 8 << 20:
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if OUTSIDE.search(line):
                hits.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}")
    assert not hits, "paths outside the repository:\n" + "\n".join(hits)


def test_the_pattern_catches_what_it_is_for():
    # The test above is only as good as this pattern: each way of naming an outside path is
    # caught, and the repository's own relative paths are not.
    for bad in ["../" + "sha" + "red/data/x", "read " + "sha" + "red/tools/machine-limits",
                "/" + "work/main/build", "/ho" + "me/alice/x", "/ro" + "ot/.cache/kiln",
                "ROOT.parent / " + '"sha' + 'red" / "data"']:
        assert OUTSIDE.search(bad), bad
    for good in ["build/fuzz/work/target", "data/gsm8k/train.jsonl", "~/.cache/kiln",
                 "scripts/setup.sh", "$HOME/.cache/kiln"]:
        assert not OUTSIDE.search(good), good


def test_gsm8k_ships_with_the_repository():
    data = REPO / "data" / "gsm8k"
    assert (data / "LICENSE").read_text().startswith("MIT License")
    digest = hashlib.sha256((data / "train.jsonl").read_bytes()).hexdigest()
    assert digest == "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465"
