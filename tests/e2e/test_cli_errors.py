"""`kiln run` on bad input: one clear error line on stderr and a non-zero exit, never a crash."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from gguf_variant import write_variant  # noqa: E402
from kiln_server import assert_one_error_line  # noqa: E402

KILN = os.environ.get("KILN_BIN", str(ROOT / "build" / "release" / "kiln"))


def run_kiln(*args, timeout=120):
    return subprocess.run([KILN, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    data = os.environ.get("KILN_TESTDATA")
    if data and (pathlib.Path(data) / "models" / "tiny-llama.gguf").exists():
        return pathlib.Path(data) / "models"
    out = tmp_path_factory.mktemp("fixtures")
    import make_models

    make_models.generate(out)
    return out / "models"


def test_missing_file():
    assert_one_error_line(run_kiln("run", "-m", "/nonexistent/model.gguf", "-p", "hi"), "cannot open")


def test_not_gguf(tmp_path):
    f = tmp_path / "notes.gguf"
    f.write_text("this is not a model\n" * 10)
    assert_one_error_line(run_kiln("run", "-m", str(f), "-p", "hi"), "GGUF")


def test_unsupported_architecture(tiny_models, tmp_path):
    dst = tmp_path / "bert.gguf"
    write_variant(tiny_models / "tiny-llama.gguf", dst, arch="bert")
    assert_one_error_line(run_kiln("run", "-m", str(dst), "-p", "hi"), "unsupported architecture 'bert'")


def test_unsupported_tensor_type(tiny_models, tmp_path):
    dst = tmp_path / "iq2xs.gguf"
    write_variant(tiny_models / "tiny-gemma3.gguf", dst, retype="blk.0.ffn_up.weight")
    assert_one_error_line(run_kiln("run", "-m", str(dst), "-p", "hi"), "iq2_xs")


def test_prompt_longer_than_context(tiny_models):
    proc = run_kiln("run", "-m", str(tiny_models / "tiny-llama.gguf"), "-c", "32", "-p", "word " * 200, "-n", "4")
    assert_one_error_line(proc, "exceeds the context")


def test_invalid_flag_value(tiny_models):
    proc = run_kiln("run", "-m", str(tiny_models / "tiny-llama.gguf"), "-p", "hi", "--temp", "-1")
    assert proc.returncode != 0


def test_tiny_model_runs(tiny_models):
    proc = run_kiln("run", "-m", str(tiny_models / "tiny-llama.gguf"), "-p", "hello", "-n", "8", "--ignore-eos")
    assert proc.returncode == 0, proc.stderr
    assert "generated: 8 tokens" in proc.stderr


def test_chat_with_a_template_kiln_does_not_render(tiny_models, tmp_path):
    dst = tmp_path / "unknown-chat.gguf"
    deepseek = (ROOT / "tests" / "fixtures" / "chat_templates" /
                "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja").read_text(encoding="utf-8")
    write_variant(tiny_models / "tiny-llama.gguf", dst, chat_template=deepseek)
    proc = run_kiln("run", "-m", str(dst), "-p", "hi", "-n", "4", "--chat")
    assert_one_error_line(proc, "the model's chat template is not one kiln renders (starts: '{% if not add_generation_",
                          "supported: gemma, gemma3, llama3")
    # Without --chat the same model runs: only chat needs the template.
    proc = run_kiln("run", "-m", str(dst), "-p", "hi", "-n", "4", "--ignore-eos")
    assert proc.returncode == 0, proc.stderr


def test_chat_without_a_template(tiny_models, tmp_path):
    dst = tmp_path / "no-chat.gguf"
    write_variant(tiny_models / "tiny-gemma3.gguf", dst, chat_template="")
    proc = run_kiln("run", "-m", str(dst), "-p", "hi", "-n", "4", "--chat")
    assert_one_error_line(proc, "the model file has no chat template (tokenizer.chat_template)")


@pytest.mark.parametrize("model", ["tiny-gemma3", "tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-mistral"])
def test_chat_on_each_tiny_model(tiny_models, model):
    proc = run_kiln("run", "-m", str(tiny_models / f"{model}.gguf"), "-p", "hi", "-n", "4", "--ignore-eos", "--chat")
    assert proc.returncode == 0, proc.stderr


def test_speculative_flags_refuse_what_cannot_run(tiny_models):
    llama = str(tiny_models / "tiny-llama.gguf")
    base = ("run", "-m", llama, "-p", "hello", "-n", "8", "--ignore-eos")
    assert_one_error_line(run_kiln(*base, "--speculative-algorithm", "standalone"),
                          "needs --speculative-draft-model-path")
    assert_one_error_line(run_kiln(*base, "--speculative-draft-model-path", llama),
                          "needs --speculative-algorithm standalone")
    # A draft model whose tokenizer is not the target's.
    assert_one_error_line(
        run_kiln(*base, "--speculative-algorithm", "standalone", "--speculative-draft-model-path",
                 str(tiny_models / "tiny-qwen2.gguf")),
        "must share the target's tokenizer")


@pytest.mark.parametrize("mode", ["optimize", "off"])
def test_speculative_run_prints_what_it_did_and_keeps_the_text(tiny_models, mode):
    """Greedy text with n-gram lookup and with a draft model (the model drafting for itself)
    equals plain decoding's, and the summary line reports the proposals."""
    llama = str(tiny_models / "tiny-llama.gguf")
    base = ("run", "-m", llama, "-p", "one two three one two three one two", "-n", "24",
            "--ignore-eos", "--graph-mode", mode)
    plain = run_kiln(*base)
    assert plain.returncode == 0, plain.stderr
    assert "speculative:" not in plain.stderr
    for extra in (("--speculative-algorithm", "ngram"),
                  ("--speculative-algorithm", "standalone", "--speculative-draft-model-path", llama)):
        spec = run_kiln(*base, *extra)
        assert spec.returncode == 0, spec.stderr
        assert spec.stdout == plain.stdout, extra
        assert "speculative:" in spec.stderr, spec.stderr
    # The model drafting for itself: every proposal accepted.
    summary = [l for l in spec.stderr.splitlines() if l.startswith("speculative:")][0]
    proposed, accepted = (int(x) for x in
                          summary.split("proposed ")[1].split(" (")[0].split(", accepted "))
    assert proposed > 0 and accepted == proposed, summary


def test_bench_speculative_alternates_and_keeps_the_text(tiny_models):
    """`kiln bench speculative` runs every prompt plain and speculative each round and says the
    texts are identical (greedy); without an algorithm it refuses with one line."""
    llama = str(tiny_models / "tiny-llama.gguf")
    base = ("bench", "speculative", "-m", llama, "-p", "one two three one two three", "-p", "hello",
            "-n", "16", "--rounds", "2")
    for extra in (("--speculative-algorithm", "ngram"),
                  ("--speculative-algorithm", "standalone", "--speculative-draft-model-path", llama)):
        proc = run_kiln(*base, *extra)
        assert proc.returncode == 0, proc.stderr
        rounds = [l for l in proc.stdout.splitlines() if l.startswith("round ")]
        assert len(rounds) == 4, proc.stdout
        summary = [l for l in proc.stdout.splitlines() if l.startswith("prompt ") and "tok/s" not in l]
        assert len(summary) == 2 and all("identical" in l for l in summary), proc.stdout
    assert_one_error_line(run_kiln(*base), "name one")
