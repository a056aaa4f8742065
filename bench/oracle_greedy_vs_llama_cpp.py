"""Greedy text of kiln against llama.cpp's llama-simple on the same tiny oracle GGUF files
(tests/oracle/data): 6 prompts, 32 generated tokens each, the texts compared whole. These random
tiny models have flat distributions, so a late near-tie can part the two (the other
architectures' files part on 1 to 4 of the 6 prompts); a misread feature parts them at once.

    .venv/bin/python3 bench/oracle_greedy_vs_llama_cpp.py --llama-bin DIR [--no-rope-scaling] GGUF...

--no-rope-scaling compares copies without the rope.scaling.* keys (plain RoPE): gpt-oss's YaRN
is run without truncation of its ramp by kiln (as its config.json says, and transformers does)
and with it by llama.cpp, so only such copies can agree exactly (docs/models.md).
DIR holds llama-simple (bench/llama_cpp_build.sh builds it).
"""
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
from make_oracle_mutants import copy_gguf  # noqa: E402  (the one GGUF rewriter)
PROMPTS = ["Janet has three apples", "How many hours does it take to walk", "The train leaves at",
           "A baker sells 12 muffins", "If each box holds 8 pencils", "Tom buys two shirts for"]


def without_rope_scaling(src: pathlib.Path, dst: pathlib.Path) -> None:
    copy_gguf(src, dst, drop_key=lambda key: ".rope.scaling." in key)


def compare(model: pathlib.Path, llama_bin: pathlib.Path, kiln: pathlib.Path) -> int:
    env = dict(os.environ, LD_LIBRARY_PATH=str(llama_bin))
    same = 0
    for p in PROMPTS:
        ll = subprocess.run([str(llama_bin / "llama-simple"), "-m", str(model), "-n", "32", p],
                            env=env, capture_output=True, check=True).stdout
        ll = ll.split(p.encode(), 1)[1]
        kr = subprocess.run([str(kiln), "run", "-m", str(model), "-p", p, "-n", "32", "--temp",
                             "0", "--ignore-eos", "--log-level", "error", "-t", "2"],
                            capture_output=True, check=True).stdout
        kr = kr.rsplit(b"\nprompt:", 1)[0]
        # llama-simple prints a byte token that is not UTF-8 as the raw byte, kiln as U+FFFD; it
        # prints the unknown token as its piece '<unk>', kiln as nothing.
        a = ll.decode("utf-8", "replace").rstrip("\n").replace("<unk>", "")
        b = kr.decode("utf-8", "replace").rstrip("\n")
        if a == b:
            same += 1
        else:
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            print(f"  {model.name} '{p}': parts at character {at} of {len(a)}")
    print(f"{model}: {same}/{len(PROMPTS)} prompts with the same 32-token greedy text")
    return same


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llama-bin", required=True, type=pathlib.Path)
    ap.add_argument("--kiln", type=pathlib.Path, default=ROOT / "build" / "release" / "kiln")
    ap.add_argument("--no-rope-scaling", action="store_true")
    ap.add_argument("models", nargs="+", type=pathlib.Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for m in args.models:
            if args.no_rope_scaling:
                copy = pathlib.Path(tmp) / (m.stem + ".no-rope-scaling.gguf")
                without_rope_scaling(m, copy)
                m = copy
            compare(m, args.llama_bin, args.kiln)


if __name__ == "__main__":
    main()
