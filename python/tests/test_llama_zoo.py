"""The C++ zoo's `llama` against Hugging Face's LlamaForCausalLM exported on the meta device: the bench's
census comparison on the tiny configuration, where every byte of difference must be accounted for."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_zoo_llama_keeps_the_bytes_of_the_hugging_face_model(tmp_path):
    from memplan_torch import command
    env = dict(os.environ, MEMPLAN=command.executable())
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "torch", "llama_crosscheck.py"), "--rows",
                        "tiny", "--workdir", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=env)
    assert p.returncode == 0, p.stdout
    rows = [ln for ln in p.stdout.splitlines() if ln.startswith("| tiny")]
    assert len(rows) == 4, p.stdout
    for ln in rows:  # the unexplained column is the last
        assert ln.rstrip(" |").split("|")[-1].strip() == "+0", ln
