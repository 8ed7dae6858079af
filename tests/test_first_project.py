"""A newcomer's first project, start to end, with ptreg's own command line only: no JSON of the
registry is ever edited. In a fresh folder with its own git repository: init, add a term,
freeze an evaluator, propose, run (cut short by its budget), see the run await its conclusion,
conclude, show, propose the next attempt at a terminal, build the site, export the whole
registry as a bundle, import it elsewhere, and validate both. Wrong registry paths on the way
point to the right one (issue 35: items 1, 4, 10 and 11).

The everyday loop that follows (issue 47, items 1 to 6): a command evaluator frozen and run
twice, the items `show` counts as lost listed by `ptreg items`, the two runs compared on one machine, a gate that does not pass on no verdict, an edited
spec frozen again under its old name, an edited harness said to no longer verify in the same
words by every command that asks, and the registry found from a subfolder."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pexpect

from helpers import as_a_shell_starts_it, patient, ptreg_in_process, tiny_spec, worked_if_for


def test_a_first_project_from_init_to_a_restored_bundle(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PTREG_REGISTRY", "CI")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t")
    env.update(GIT_COMMITTER_EMAIL="t@example.org", COLUMNS="120")

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=project, capture_output=True, text=True, env=env, check=True)
        return done.stdout

    def ptreg(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        if args[0] == "run":  # a run records the machine as its process finds it (BLAS loaded): a program
            done = subprocess.run(
                [sys.executable, "-m", "ptreg", *args],
                cwd=project,
                capture_output=True,
                text=True,
                env=env,
                timeout=patient(600),
            )
        else:  # the CLI's entry point in this process: each call would otherwise start Python and ptreg
            done = ptreg_in_process(project, list(args), env)
        assert done.returncode == code, f"ptreg {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr
        return done

    git("init", "-q")
    ptreg("init")
    ptreg("vocab", "add", "method", "loop-tiling", "--description", "Tile the loops of a kernel by hand.")
    assert "loop-tiling" in ptreg("vocab", "list", "method").stdout

    # The evaluator spec is the one file a person writes: how the attempt will be measured.
    (project / "tiny.json").write_text(json.dumps({**tiny_spec("tiny-naive", timed_steps=2, repeats=2), "seed": 0}))
    frozen = ptreg("evaluator", "freeze", "tiny.json", "--json")
    ref = json.loads(frozen.stdout)["ref"]

    ptreg(
        "new", "--id", "tiled-step", "--name", "Tiled training step", "--family", "runtime-perf",
        "--kind", "runtime-benchmark", "--objective", "training-step-time", "--method", "loop-tiling",
        "--question", "Does tiling the loops change the tiny step time?", "--evaluator", ref,
        "--budget-seconds", "600", "--budget-memory-mb", "1", "--tracking-issue", "#1", "--no-input",
        "--worked-if", "ms_per_step(backend=naive, config=tiny) > 0",
    )  # fmt: skip
    ran = ptreg("run", "tiled-step", code=1)  # the 1 MB budget stops every worker: nothing measured
    assert "budget-exhausted" in ran.stdout + ran.stderr

    # the project's root, or a folder that is not there, is no registry: each error says where to go
    root_given = ptreg("-r", ".", "list", code=2)
    assert "use `-r attempts`" in root_given.stderr and "ptreg init" not in root_given.stderr
    assert "`ptreg init elsewhere`" in ptreg("-r", "elsewhere", "list", code=2).stderr
    assert not (project / "elsewhere").exists() and not (project / "attempts" / "attempts").exists()

    # ran, not yet concluded: said wherever its status shows
    listed = ptreg("list").stdout
    assert "tiled-step  not-tried (ran)" in listed and "awaits `ptreg conclude ID`" in listed
    assert "tiled-step [not-tried (ran)]" in ptreg("lineage", "tiled-step").stdout
    environment = next((project / "attempts" / "runs" / "tiled-step").glob("*/environment.json"))
    assert json.loads(environment.read_text())["git"]["dirty"] is None  # no commit yet: neither clean nor dirty
    built = ptreg("site")  # at its default place, site/ beside the registry: git leaves it out
    assert "a run awaits its conclusion" in (project / "site" / "attempts" / "tiled-step.html").read_text(), built

    ptreg(
        "conclude", "tiled-step", "--status", "inconclusive",
        "--lesson", "A memory budget below a worker's size measures nothing.",
        "--next-action", "Propose again with a memory budget above a worker's size.",
        "--failure-reason", "The budget stopped every worker before its first step.",
        "--confidence", "inferred", "--evidence", "The run's cells were all stopped at 1 MB.",
    )  # fmt: skip
    shown = json.loads(ptreg("show", "tiled-step", "--json").stdout)
    assert shown["attempt"]["status"] == "inconclusive"
    assert "nothing was measured" in shown["attempt"]["evidence"]
    assert "Tiled training step" in ptreg("show", "tiled-step").stdout
    ptreg("validate", "--check-sources")

    # the next attempt, proposed at a terminal: it varies the first, and each answer is checked as given
    child = pexpect.spawn(
        sys.executable, ["-m", "ptreg", "new"], cwd=str(project), env=env, encoding="utf-8", timeout=patient(120)
    )

    def answer(prompt: str, text: str) -> None:
        child.expect_exact(prompt)
        child.sendline(text)

    answer("id (a lowercase slug; the file name):", "tiled-step-512mb")
    answer("name:", "")
    child.expect_exact("name is needed")  # an empty answer is asked again, with the reason
    answer("name:", "Tiled training step within 512 MB")
    answer("varied from (the id of the attempt it varies) (Enter to skip):", "tiled-step")
    answer("family [runtime-perf]:", "")  # from the attempt it varies
    answer("kind [runtime-benchmark]:", "")
    answer("objective [training-step-time]:", "")
    answer("methods (comma-separated) (Enter to skip):", "loop-tiling")
    answer("bases it builds on (comma-separated) (Enter to skip):", "")
    answer("question (what this run answers):", "Does tiling the loops change the tiny step time?")
    child.expect_exact("the same question as tiled-step")  # stale: said now, not after every prompt
    answer("question (what this run answers):", "Within 512 MB, does tiling the loops change the tiny step time?")
    answer("hypothesis (the expected answer) (Enter to skip):", "")
    child.expect_exact("Propose again with a memory budget above a worker's size.")
    answer("what is varied from tiled-step:", "a memory budget of 512 MB")
    answer("how this answers that disposition:", "Its budget is above a worker's size.")
    answer(f"evaluator [{ref}]:", "")
    answer("margins (METRIC=VALUE, comma-separated: the smallest effects that matter) (Enter to skip):", "")
    answer("worked if", "ms_per_step(backend=naive, config=tiny) < 1000")
    answer("regressed if (a condition, checked first) (Enter to skip):", "")
    answer("budget: wall-clock seconds at most:", "600")
    answer("tracking issue", "#2")
    answer("[Y/n]:", "y")
    child.expect(pexpect.EOF)
    assert child.wait() == 0, child.before  # waited for: close() would signal a child still exiting
    child.close()
    assert "admitted: wrote" in child.before

    git("add", "-A")
    status = git("status", "--porcelain", "--ignored").splitlines()
    assert not [line for line in status if ".lock" in line and "!!" not in line], status  # the registry lock files
    assert not [line for line in status if "site" in line and "!!" not in line], status
    git("commit", "-q", "-m", "first attempt")

    ptreg("export", "--bundle", str(tmp_path / "registry.tar.gz"))
    restored = tmp_path / "elsewhere" / "attempts"
    (tmp_path / "elsewhere").mkdir()
    imported = json.loads(ptreg("-r", str(restored), "import", str(tmp_path / "registry.tar.gz"), "--json").stdout)
    assert (imported["imported"], imported["evaluators_added"], imported["runs_added"]) == (2, 1, 1)
    ptreg("-r", str(restored), "validate", "--check-sources")
    assert json.loads(ptreg("-r", str(restored), "show", "tiled-step", "--json").stdout)["attempt"] == shown["attempt"]
    assert git("status", "--porcelain") == ""  # the lock and working files are ignored


# The candidate gets q0, q10, q20 and q30 right where the baseline does not, and q7, q21 and q35
# wrong where the baseline gets them right: 4 items won, 3 lost, 33 tied.
HARNESS = """\
import json, os
items = [json.loads(line) for line in open("items.jsonl")]
def right(i):
    if os.environ["PTREG_ARM"] == "candidate" and i % 10 == 0:
        return 1
    if os.environ["PTREG_ARM"] == "candidate" and i % 14 == 7:
        return 0
    return i % 2
with open(os.environ["PTREG_ITEMS"], "w") as out:
    for item in items:
        out.write(json.dumps({"item": f"q{item['id']}", "score": right(item["id"])}) + "\\n")
with open(os.environ["PTREG_METRICS"], "w") as out:
    out.write(json.dumps({"score": sum(right(i["id"]) for i in items) / len(items)}) + "\\n")
"""
SPEC = {
    "name": "sentiment-acc",
    "workload": "command",
    "command": ["python3", "harness.py"],
    "arms": {"baseline": {}, "candidate": {}},
    "baseline": "baseline",
    "inputs": ["items.jsonl"],
    "metrics": {"score": {"better": "higher", "unit": "fraction"}},
    "repeats": 2,
    "seed": 0,
    "timeout_seconds": 60,
}


def test_the_everyday_loop_of_a_first_project(tmp_path: Path) -> None:
    project = tmp_path / "myproj"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PTREG_REGISTRY", "CI")}
    env.update(COLUMNS="120", PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))

    def ptreg(*args: str, code: int = 0, cwd: Path = project) -> subprocess.CompletedProcess[str]:
        if args[0] == "run":  # a run records the machine as its process finds it (BLAS loaded): a program
            done = subprocess.run(
                [sys.executable, "-m", "ptreg", *args],
                cwd=cwd,
                capture_output=True,
                text=True,
                env=env,
                timeout=patient(600),
            )
        else:  # the CLI's entry point in this process: each call would otherwise start Python and ptreg
            done = ptreg_in_process(cwd, list(args), env)
        assert done.returncode == code, f"ptreg {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr
        return done

    def flat(text: str) -> str:
        return " ".join(text.split())  # a sentence wrapped to the terminal, read as one line

    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / "harness.py").write_text(HARNESS)
    (project / "items.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(40)))
    (project / "spec.json").write_text(json.dumps(SPEC))
    ptreg("init")
    ref = json.loads(ptreg("evaluator", "freeze", "spec.json", "--json").stdout)["ref"]

    # item 3: an edited spec frozen under its old name is refused then and there, saying what to do
    (project / "edited.json").write_text(json.dumps({**SPEC, "repeats": 3}))
    refused = ptreg("evaluator", "freeze", "edited.json", code=2)
    assert f"frozen already as {ref}" in refused.stderr and '"name": "sentiment-acc-2"' in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "already frozen" in ptreg("evaluator", "freeze", "spec.json").stdout  # the same spec: nothing new
    assert [p.stem for p in (project / "attempts" / "evaluators").glob("*.json")] == [ref]

    def propose(attempt: str, question: str, issue: str) -> None:
        ptreg(
            "new", "--no-input", "--id", attempt, "--name", attempt, "--family", "eval",
            "--kind", "model-evaluation", "--objective", "command-latency", "--method", "vendor-blas",
            "--question", question, "--evaluator", ref, "--budget-seconds", "300", "--tracking-issue", issue,
            "--worked-if", worked_if_for(SPEC),
        )  # fmt: skip

    propose("scored", "Does the candidate score higher than the baseline?", "#1")
    runs = [json.loads(ptreg("run", "scored", "--json").stdout)["run_id"] for _ in range(2)]

    # item 6: `show` counts the items won, lost and tied; `items` lists them, and the lost are those counted
    shown = flat(ptreg("show", "scored").stdout)
    assert set(re.findall(r"(\d+)/(\d+)/(\d+) of 40 items", shown)) == {("4", "3", "33")}, shown
    lost = ptreg("items", "scored", "--lost").stdout
    assert "4 won, 3 lost, 33 tied of 40 items (score, candidate over baseline, 2 seeds)" in flat(lost)
    assert [line.split()[0] for line in lost.splitlines()[3:6]] == ["q21", "q35", "q7"]
    listed = json.loads(ptreg("items", f"scored/{runs[0]}", "--lost", "--json").stdout)["metrics"]
    assert [(m["arm"], m["over"], m["lost"], len(m["items"])) for m in listed] == [("candidate", "baseline", 3, 3)]
    won = json.loads(ptreg("items", "scored", "--won", "--json").stdout)["metrics"][0]["items"]
    assert sorted(i["item"] for i in won) == ["q0", "q10", "q20", "q30"]

    # item 1: two runs minutes apart on this machine are runs of one machine, whatever it leaves unknown
    a, b = (f"scored/{run}" for run in runs)
    compared = json.loads(ptreg("compare", a, b, "--json").stdout)
    assert compared["same_machine"] and compared["machine_differences"] == []
    assert all("unknown" in line for line in compared["machine_unknowns"])  # shown as unknown, never filled in
    assert "the machines differ" not in ptreg("compare", a, b).stdout
    # item 2: with two runs, the times have no history to be judged against: a gate fails on that
    gated = ptreg("compare", a, b, "--fail-on-regression", code=1)
    assert "given no verdict, so no regression is ruled out" in gated.stderr
    assert ptreg("compare", a, b, "--fail-on-regression", "--json", code=1).stdout.startswith("{")
    ptreg("compare", a, b, "--fail-on-regression", "--no-verdict=pass")

    # item 5: from a subfolder, the registry above is found, as git finds .git
    deeper = project / "sub" / "deeper"
    deeper.mkdir(parents=True)
    assert "scored" in ptreg("list", cwd=deeper).stdout
    assert "ptreg init" not in ptreg("list", cwd=deeper).stderr
    (project / "scratch").mkdir()
    made = ptreg("init", cwd=project / "scratch")
    assert "a registry exists above, ../attempts" in made.stderr

    # item 4: the harness edited after freezing: every command that asks says so, in the same words
    propose("scored-again", "Does the candidate still score higher on a second look?", "#2")
    ptreg("evaluator", "verify")
    (project / "harness.py").write_text(HARNESS + "# tuned\n")
    words = "no longer verifies: a file its command runs changed since it was frozen: harness.py: sha256"
    assert f"{ref} {words}" in flat(ptreg("evaluator", "list").stdout)
    assert "1 does not verify" in ptreg("evaluator", "verify", code=1).stdout
    assert words in flat(ptreg("evaluator", "show", ref, code=1).stdout)
    validated = flat(ptreg("validate").stdout)
    assert f"its evaluator {ref} {words}" in validated and "2 warnings: valid" in validated
    assert f"{ref} {words}" in flat(ptreg("gate", "scored-again", code=1).stdout)
    assert "harness.py: sha256" in ptreg("run", "scored-again", code=2).stderr  # nothing run

    # interactive new neither offers the stale evaluator nor takes it after every other answer
    child = pexpect.spawn(
        sys.executable,
        [
            "-m", "ptreg", "new", "--id", "scored-third", "--name", "third", "--family", "eval",
            "--kind", "model-evaluation", "--objective", "command-latency", "--method", "vendor-blas",
            "--question", "Does a third look agree?", "--budget-seconds", "300", "--tracking-issue", "#3",
            "--worked-if", worked_if_for(SPEC),
        ],
        cwd=str(deeper), env=env, encoding="utf-8", timeout=patient(120), preexec_fn=as_a_shell_starts_it,  # Ctrl-C interrupts
    )  # fmt: skip
    seen = io.StringIO()
    child.logfile_read = seen
    while child.expect_exact(["(Enter to skip):", "evaluator: one of"]) == 0:
        child.sendline("")
    child.expect_exact("\nevaluator: ")  # the prompt, after the frozen evaluators are listed
    assert f"{ref} {words}" in flat(seen.getvalue())  # the choice is listed with why it is stale
    assert f"evaluator [{ref}]" not in seen.getvalue()  # and not offered: the prompt has no default
    child.sendline(ref)
    child.expect_exact("try again")
    assert words in flat(child.before)
    child.sendcontrol("c")
    child.expect(pexpect.EOF)
    child.close()
    assert not (project / "attempts" / "scored-third.json").exists()
