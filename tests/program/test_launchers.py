"""Launchers: the commands in shell scripts and docs that run the tree's files."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xla_lint.program.launchers import (
    is_pytest_launch,
    is_shell_script,
    option_value,
    project_scripts,
    scan,
    spmd_flag_on,
)


def runs(path: str, text: str) -> list[tuple[str, bool, list[str], str]]:
    return [
        (launch.runs, launch.module, sorted(launch.facts), launch.where)
        for launch in scan(path, text)
    ]


def test_exported_and_inline_environment():
    text = (
        "#!/bin/bash\nset -e\nexport XLA_USE_SPMD=1\npython3 train.py --steps 10\n"
        "unset XLA_USE_SPMD\nPYTHONUNBUFFERED=1 nohup python eval.py &\npython -m pkg.cli -x\n"
    )
    assert runs("run.sh", text) == [
        ("train.py", False, ["spmd"], "run.sh:4"),
        ("eval.py", False, ["unbuffered"], "run.sh:6"),
        ("pkg.cli", True, [], "run.sh:7"),
    ]


def test_torchrun_and_distributed_run_are_one_process_per_device():
    text = (
        "torchrun --nproc_per_node=4 --master_port 1234 \\\n    examples/train.py --bf16\n"
        "python -m torch.distributed.run --nnodes 1 -m pkg.main\n"
    )
    assert runs("x.sh", text) == [
        ("examples/train.py", False, ["multiprocess", "torchrun"], "x.sh:1"),
        ("pkg.main", True, ["multiprocess", "torchrun"], "x.sh:3"),
    ]


def test_python_options_and_commands_that_run_no_file():
    text = (
        "python -W ignore -u train.py\npython -c 'import torch_xla'\npip install torch_xla\n"
        "echo python train.py  # not run\npython setup.py develop ; python3.11 -X dev a.py\n"
    )
    assert [r[:3] for r in runs("x.sh", text)] == [
        ("train.py", False, ["unbuffered"]),
        ("setup.py", False, []),
        ("a.py", False, []),
    ]


def test_markdown_and_rst_shell_blocks():
    md = (
        "# Guide\n\n```python\nimport os\n```\n\n```bash\n$ export XLA_USE_SPMD=1\n$ python train.py\n```\n\n"
        "```console\nXLA_USE_SPMD=0 python other.py\n```\n"
    )
    assert runs("docs/GUIDE.md", md) == [
        ("train.py", False, ["spmd"], "docs/GUIDE.md:9"),
        ("other.py", False, [], "docs/GUIDE.md:13"),
    ]
    rst = "Run\n\n.. code-block:: bash\n\n   XLA_USE_SPMD=1 python run_spmd.py\n\nText\n"
    assert runs("docs/x.rst", rst) == [("run_spmd.py", False, ["spmd"], "docs/x.rst:5")]


def test_an_untagged_block_that_starts_with_a_launch_is_a_shell_block():
    """unseen7 RobustCNN TRAIN.md: an untagged block `python3 launch_xla.py --num-devices 8
    ...`; untagged blocks of Python code or of output are not read as commands."""
    md = (
        "On TPU:\n```\npython3 launch_xla.py --num-devices 8 train.py /data \\\n--lr 5e-4\n```\n"
        "```\n$ XLA_USE_SPMD=1 torchrun --nproc_per_node 2 spmd.py\n```\n"
        "```\nimport os\nos.system('python hidden.py')\n```\n"
        "```\nEpoch 1: loss 0.3 (python main.py printed this)\n```\n"
    )
    assert runs("TRAIN.md", md) == [
        ("launch_xla.py", False, [], "TRAIN.md:3"),
        ("spmd.py", False, ["multiprocess", "spmd", "torchrun"], "TRAIN.md:7"),
    ]


def test_unreadable_shell_is_skipped_not_fatal():
    assert runs("x.sh", "python 'unterminated.py\npython ok.py\n") == [
        ("ok.py", False, [], "x.sh:2")
    ]


def test_project_scripts(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname="a"\n[project.scripts]\na = "pkg.cli:main"\n'
    )
    [launch] = project_scripts(str(tmp_path))
    assert (launch.runs, launch.module) == ("pkg.cli", True)
    (tmp_path / "pyproject.toml").write_text("not toml = = =")
    assert project_scripts(str(tmp_path)) == []


# ---- XLA_USE_SPMD values: torch_xla 2.9's check_env_flag -------------------------------------


def test_spmd_flag_on_is_torch_xla_check_env_flag():
    xu = pytest.importorskip("torch_xla.utils.utils")  # the runtime extra

    values = [
        "1",
        "2",
        "007",
        "true",
        "0",
        "00",
        "",
        "True",
        "TRUE",
        "yes",
        "on",
        " 1",
        "1 ",
        "-1",
        "+1",
        "1.0",
        "²",
        "٣",
    ]
    for value in values:
        os.environ["XLA_LINT_TEST_FLAG"] = value
        try:
            expected = xu.check_env_flag("XLA_LINT_TEST_FLAG")
        except ValueError:  # "²".isdigit() but int("²") raises: torch_xla fails, SPMD is not on
            expected = False
        finally:
            del os.environ["XLA_LINT_TEST_FLAG"]
        assert spmd_flag_on(value) is expected, value
    assert spmd_flag_on("2") and not spmd_flag_on("True") and not spmd_flag_on("yes")


def test_launcher_spmd_values_follow_check_env_flag():
    text = (
        "XLA_USE_SPMD=True python a.py\nXLA_USE_SPMD=yes python b.py\nXLA_USE_SPMD=2 python c.py\n"
    )
    assert [r[:3] for r in runs("x.sh", text)] == [
        ("a.py", False, []),
        ("b.py", False, []),
        ("c.py", False, ["spmd"]),
    ]


# ---- shell variables are not exported -------------------------------------------------------


def test_plain_assignment_is_a_shell_variable_not_the_childs_environment():
    assert runs("x.sh", "XLA_USE_SPMD=1\npython train.py\n") == [("train.py", False, [], "x.sh:2")]
    assert runs("x.sh", "PYTHONUNBUFFERED=1\npython train.py\n") == [
        ("train.py", False, [], "x.sh:2")
    ]


def test_export_of_a_name_or_set_a_exports_the_assignment():
    text = "XLA_USE_SPMD=1\npython a.py\nexport XLA_USE_SPMD\npython b.py\nXLA_USE_SPMD=0\npython c.py\n"
    assert [r[:3] for r in runs("x.sh", text)] == [
        ("a.py", False, []),
        ("b.py", False, ["spmd"]),
        ("c.py", False, []),
    ]
    text = "set -a\nXLA_USE_SPMD=1\nset +a\nPYTHONUNBUFFERED=1\npython a.py\n"
    assert [r[:3] for r in runs("x.sh", text)] == [("a.py", False, ["spmd"])]
    text = "set -euo pipefail\nXLA_USE_SPMD=1\npython a.py\nset -o allexport\nXLA_USE_SPMD=1\npython b.py\n"
    assert [r[:3] for r in runs("x.sh", text)] == [("a.py", False, []), ("b.py", False, ["spmd"])]
    text = "declare -x XLA_USE_SPMD=1\npython a.py\nexport -n XLA_USE_SPMD\npython b.py\n"
    assert [r[:3] for r in runs("x.sh", text)] == [("a.py", False, ["spmd"]), ("b.py", False, [])]


def test_subshell_exports_stay_in_the_subshell():
    text = "(export XLA_USE_SPMD=1; python a.py)\npython b.py\n( cd x\n  export XLA_USE_SPMD=1\n)\npython c.py\n"
    assert [r[:3] for r in runs("x.sh", text)] == [
        ("a.py", False, ["spmd"]),
        ("b.py", False, []),
        ("c.py", False, []),
    ]


# ---- command forms ----------------------------------------------------------------------------


def test_export_inside_if_counts_for_later_commands():
    text = (
        'MODE=${1:-spmd}\nif [ "$MODE" = spmd ]; then export XLA_USE_SPMD=1; fi\npython train.py\n'
        "for i in 1 2; do PYTHONUNBUFFERED=1 python loop.py; done\n"
        "if true\nthen\n  echo\nelse export PYTHONUNBUFFERED=1\nfi\n{ python grouped.py; } > log 2>&1\n"
    )
    assert [r[:3] for r in runs("x.sh", text)] == [
        ("train.py", False, ["spmd"]),
        ("loop.py", False, ["spmd", "unbuffered"]),
        ("grouped.py", False, ["spmd", "unbuffered"]),
    ]


def test_case_arms_do_not_end_a_subshell():
    text = "case $1 in\n  spmd) export XLA_USE_SPMD=1 ;;\n  *) ;;\nesac\npython t.py\n"
    assert [r[:3] for r in runs("x.sh", text)] == [("t.py", False, ["spmd"])]


def test_env_options():
    text = (
        "env -u FOO XLA_USE_SPMD=1 python a.py\nenv -i XLA_USE_SPMD=1 python b.py\n"
        "env -- XLA_USE_SPMD=1 python c.py\nexport XLA_USE_SPMD=1\nenv -i PATH=/bin python d.py\n"
        "env -u XLA_USE_SPMD python e.py\nenv --unset=XLA_USE_SPMD python f.py\nenv python g.py\n"
        "env -S 'python -u' h.py\n"
    )
    assert [r[:3] for r in runs("x.sh", text)] == [
        ("a.py", False, ["spmd"]),
        ("b.py", False, ["spmd"]),
        ("c.py", False, ["spmd"]),
        ("d.py", False, []),
        ("e.py", False, []),
        ("f.py", False, []),
        ("g.py", False, ["spmd"]),
        ("h.py", False, ["spmd", "unbuffered"]),
    ]


def test_sudo_keeps_the_environment_only_when_asked():
    text = (
        "export XLA_USE_SPMD=1\nsudo -E python a.py\nsudo python b.py\nsudo -u tpu --preserve-env python c.py\n"
        "sudo --preserve-env=XLA_USE_SPMD,HOME python d.py\nsudo XLA_USE_SPMD=1 python3 e.py\n"
        "sudo -l python f.py\n"
    )
    assert [r[:3] for r in runs("x.sh", text)] == [
        ("a.py", False, ["spmd"]),
        ("b.py", False, []),
        ("c.py", False, ["spmd"]),
        ("d.py", False, ["spmd"]),
        ("e.py", False, ["spmd"]),
    ]


def test_process_wrappers_and_their_options():
    text = (
        "export XLA_USE_SPMD=1\ntimeout 600 python a.py\ntimeout -s KILL --kill-after=5 10m python b.py\n"
        "numactl --cpunodebind=0 --membind 0 python c.py\nnumactl -N 0 -m0 python d.py\n"
        "nice -n 5 python e.py\nnice -10 python f.py\nstdbuf -oL python g.py\nstdbuf -o 0 -e0 python h.py\n"
        "taskset -c 0-3 python i.py\nnohup time -p python j.py &\nexec -c python k.py\ncommand -v python l.py\n"
    )
    assert [r[:3] for r in runs("x.sh", text)] == [
        ("a.py", False, ["spmd"]),
        ("b.py", False, ["spmd"]),
        ("c.py", False, ["spmd"]),
        ("d.py", False, ["spmd"]),
        ("e.py", False, ["spmd"]),
        ("f.py", False, ["spmd"]),
        ("g.py", False, ["spmd"]),
        ("h.py", False, ["spmd"]),
        ("i.py", False, ["spmd"]),
        ("j.py", False, ["spmd"]),
        ("k.py", False, []),
    ]


def test_command_substitution_runs_its_command():
    text = (
        'OUT=$(XLA_USE_SPMD=1 python t.py)\necho "result: $(python -u u.py --x)"\nV=`python v.py`\n'
        "X=$(( 1 + 2 ))\n"
    )
    assert runs("x.sh", text) == [
        ("t.py", False, ["spmd"], "x.sh:1"),
        ("u.py", False, ["unbuffered"], "x.sh:2"),
        ("v.py", False, [], "x.sh:3"),
    ]


def test_python_options():
    text = (
        "python -um pkg.a\npython -mpkg.b\npython -E -u c.py\nPYTHONUNBUFFERED=1 python -I d.py\n"
    )
    assert [r[:3] for r in runs("x.sh", text)] == [
        ("pkg.a", True, ["unbuffered"]),
        ("pkg.b", True, []),
        ("c.py", False, ["unbuffered"]),
        ("d.py", False, []),
    ]


# ---- remote commands ---------------------------------------------------------------------------


def test_gcloud_tpu_vm_ssh_command_is_a_nested_command_line():
    text = (
        "export PYTHONUNBUFFERED=1\n"
        "gcloud compute tpus tpu-vm ssh $TPU --zone us-central2-b --worker=all "
        '--command="export XLA_USE_SPMD=1; python train.py"\n'
        "gcloud alpha compute tpus tpu-vm ssh $TPU --worker all --command 'cd repo && python3 eval.py'\n"
        'gcloud compute tpus tpu-vm ssh $TPU --worker=all --command="\n  export XLA_USE_SPMD=1\n'
        '  python multi.py --steps 5\n"\npython local.py\n'
    )
    assert runs("x.sh", text) == [
        ("train.py", False, ["spmd"], "x.sh:2"),
        ("eval.py", False, [], "x.sh:3"),
        ("multi.py", False, ["spmd"], "x.sh:6"),  # the line that names it, in the quoted command
        ("local.py", False, ["unbuffered"], "x.sh:8"),
    ]


def test_a_command_inside_a_continued_line_is_reported_on_the_physical_line_that_holds_it():
    # ml-testing-accelerators' pod entrypoint: a `\`-continued `&&` chain whose last element is
    # a gcloud ssh --command string continued over several lines; the module it runs is on
    # the chain's eighth line, not its first.
    text = (
        "timeout 180 /setup.sh && \\\n"
        "export master=$(gcloud compute instance-groups list-instances G --limit=1) && \\\n"
        "gcloud -q compute ssh --internal-ip $master \\\n"
        '  --command "source /etc/profile && \\\n'
        "  conda activate env && \\\n"
        '  python -m torch_xla.distributed.xla_dist --tpu=$POD -- $*"\n'
        "python after.py\n"
    )
    launches = scan("entry.sh", text)
    assert [(la.runs, la.line, la.where) for la in launches] == [
        ("torch_xla.distributed.xla_dist", 6, "entry.sh:6"),
        ("after.py", 7, "entry.sh:7"),
    ]


def test_ssh_command_is_a_nested_command_line_without_the_local_environment():
    text = (
        "export XLA_USE_SPMD=1\nssh host 'python a.py'\n"
        'ssh -i key.pem -p 22 user@host "XLA_USE_SPMD=1 python b.py"\n'
        "ssh host -t python c.py\nssh host\nbash -c 'python d.py'\nsh -ec \"export XLA_USE_SPMD=0; python e.py\"\n"
    )
    assert [r[:3] for r in runs("x.sh", text)] == [
        ("a.py", False, []),
        ("b.py", False, ["spmd"]),
        ("c.py", False, []),
        ("d.py", False, ["spmd"]),
        ("e.py", False, []),
    ]


# ---- pytest --------------------------------------------------------------------------------


def test_pytest_launches_name_each_path_argument():
    text = (
        "XLA_USE_SPMD=1 pytest tests/\npython -m pytest tests/test_mesh.py -x\n"
        "py.test -k 'mesh and not slow' -m tpu -n 4 -p no:cacheprovider --maxfail 1 tests/a tests/b.py::test_x\n"
        "XLA_USE_SPMD=1 pytest -q\npython -u -m pytest --pyargs pkg.tests\n"
        "torchrun --nproc_per_node 4 -m pytest t\n"
    )
    assert runs("x.sh", text) == [
        ("tests/", False, ["spmd"], "x.sh:1"),
        ("tests/test_mesh.py", False, [], "x.sh:2"),
        ("tests/a", False, [], "x.sh:3"),
        ("tests/b.py", False, [], "x.sh:3"),
        (".", False, ["spmd"], "x.sh:4"),
        ("pkg.tests", True, ["unbuffered"], "x.sh:5"),
        ("t", False, ["multiprocess", "torchrun"], "x.sh:6"),
    ]
    launches = scan("x.sh", text)
    assert [launch.why for launch in launches] == [
        "pytest, XLA_USE_SPMD=1",
        "python -m pytest",
        "py.test",
        "py.test",
        "pytest, XLA_USE_SPMD=1",
        "python -m pytest, python -u",
        "torchrun -m pytest",
    ]
    assert all(is_pytest_launch(launch) for launch in launches)
    assert not any(
        is_pytest_launch(launch)
        for launch in scan("x.sh", "python t.py\npython -m pkg\ntorchrun t.py\n")
    )


def test_time_keyword_takes_prefix_assignments():
    text = "time XLA_USE_SPMD=1 python a.py\ntime -p PYTHONUNBUFFERED=1 python b.py\nnohup time python c.py\n"
    assert [r[:3] for r in runs("x.sh", text)] == [
        ("a.py", False, ["spmd"]),
        ("b.py", False, ["unbuffered"]),
        ("c.py", False, []),
    ]


def test_doc_placeholders_prompts_and_redirections():
    md = (
        "```bash\n(vm)$ python3 a.py\nuser@tpu-vm:~/repo$ XLA_USE_SPMD=1 python b.py\n"
        "torchrun --nproc_per_node=<GPUS> --node_rank <RANK> \\\n    c.py\n"
        "python d.py > out.log 2>&1 < in.txt\n```\n"
    )
    assert runs("docs/x.md", md) == [
        ("a.py", False, [], "docs/x.md:2"),
        ("b.py", False, ["spmd"], "docs/x.md:3"),
        ("c.py", False, ["multiprocess", "torchrun"], "docs/x.md:4"),
        ("d.py", False, [], "docs/x.md:6"),
    ]


def test_subshell_in_a_condition_and_sudo_k():
    text = "if (export XLA_USE_SPMD=1; python a.py); then\n  python b.py\nfi\nsudo -k -E XLA_USE_SPMD=1 python c.py\n"
    assert [r[:3] for r in runs("x.sh", text)] == [
        ("a.py", False, ["spmd"]),
        ("b.py", False, []),
        ("c.py", False, ["spmd"]),
    ]


def test_odd_shell_text_never_raises():
    pieces = [
        "python",
        "a.py",
        "'",
        '"',
        "`",
        "$(",
        ")",
        "(",
        "${",
        "}",
        "\\",
        "\n",
        ";",
        "&&",
        "|",
        ">",
        "<",
        "&",
        "export",
        "X=1",
        "XLA_USE_SPMD=1",
        "env",
        "-u",
        "sudo",
        "ssh",
        "h",
        "--command=",
        "gcloud",
        "bash",
        "-c",
        "case",
        "esac",
        "#",
        "<<EOF",
        "pytest",
        "-m",
        "$'",
        "=(",
        "time",
        "-p",
        "set",
        "-a",
    ]
    import random

    rng = random.Random(0)
    for _ in range(3000):
        text = " ".join(rng.choice(pieces) for _ in range(rng.randint(1, 25)))
        for name in ("x.sh", "x.md"):
            scan(name, text if name == "x.sh" else f"```bash\n{text}\n```\n")


def test_a_non_breaking_space_is_part_of_a_word_as_in_bash():
    """A doc's shell block with U+00A0 (cambrian-mllm/cambrian docs/TPUs_Torch_XLA.md) crashed
    the whole run with StopIteration; bash keeps the character inside the word."""
    text = "```bash\nTPU_TYPE=v4-8\u00a0 # c\npython train.py --spmd\n```\n"
    [launch] = scan("docs/setup.md", text)
    assert launch.runs == "train.py" and not launch.module


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_any_shell_text_scans_without_an_error(text):
    """A launcher only adds facts: any text in a shell script or doc block scans to a list
    (possibly empty), never an exception."""
    assert isinstance(scan("run.sh", text), list)
    assert isinstance(scan("README.md", f"```bash\n{text}\n```\n"), list)


def test_a_launcher_that_cannot_be_scanned_does_not_stop_the_run(tmp_path, monkeypatch):
    """read_launches skips a file whose scan fails (and lint goes on) instead of ending the run."""
    from xla_lint.program import launchers

    (tmp_path / "bad.sh").write_text("python train.py\n")
    (tmp_path / "good.sh").write_text("python train.py\n")
    real = launchers.scan

    def scan_or_fail(path, text):
        if path.endswith("bad.sh"):
            raise RuntimeError("boom")
        return real(path, text)

    monkeypatch.setattr(launchers, "scan", scan_or_fail)
    found = launchers.read_launches([str(tmp_path / "bad.sh"), str(tmp_path / "good.sh")])
    assert [os.path.basename(launch.where.split(":")[0]) for launch in found] == ["good.sh"]


# ---- what a launch gives its program: line, arguments, environment with origins ------------


def one(path: str, text: str):
    found = scan(path, text)
    assert len(found) == 1, found
    return found[0]


def test_quoting_and_continuations_reach_the_arguments():
    launch = one(
        "run.sh",
        'python xla_spawn.py \\\n    --num_cores 8 "train.py" \\\n    --name \'a b\' --x="$Y z"\n',
    )
    assert (launch.runs, launch.line, launch.where) == ("xla_spawn.py", 1, "run.sh:1")
    assert launch.argv == ("--num_cores", "8", "train.py", "--name", "a b", "--x=$Y z")
    assert launch.launcher == "python" and not launch.document


def test_export_of_several_names_and_a_prefix_assignment_keep_the_line_that_set_them():
    launch = one(
        "run.sh",
        "#!/bin/bash\nexport A=1 B=2\nC=3\nexport C\nXLA_USE_BF16=1 python train.py\n",
    )
    assert launch.env == (
        ("A", "1", "run.sh:2"),
        ("B", "2", "run.sh:2"),
        ("C", "3", "run.sh:3"),
        ("XLA_USE_BF16", "1", "run.sh:5"),
    )
    # A plain assignment is not exported: the child does not see it.
    assert one("run.sh", "D=4\npython train.py\n").env == ()


def test_python_u_m_module_and_its_arguments():
    launch = one("run.sh", "python -u -m pkg.train --lr 3e-4\n")
    assert (launch.runs, launch.module, launch.argv) == ("pkg.train", True, ("--lr", "3e-4"))
    assert "unbuffered" in launch.facts


def test_accelerate_launch_tpu_is_one_process_per_device_and_passes_no_nprocs():
    launch = one(
        "launch.sh",
        "XLA_USE_SPMD=1 accelerate launch --tpu --num_processes=4 "
        "--main_training_function main train.py --lr 1\n",
    )
    assert (launch.runs, launch.launcher, launch.processes) == (
        "train.py",
        "accelerate",
        "per-device",
    )
    assert launch.facts == {"multiprocess", "spmd"}
    assert launch.argv == ("--lr", "1")
    # Options that take a value are skipped with it (`--num_processes 8` is not the script).
    assert one("l.sh", "accelerate launch --num-processes 8 --tpu x.py\n").runs == "x.py"
    # Without --tpu (and no config) accelerate runs the script in one process: no mode.
    plain = one("l.sh", "accelerate launch --num_processes 1 x.py --a\n")
    assert (plain.facts, plain.processes, plain.argv) == (frozenset(), "", ("--a",))
    # GPU launchers run nothing of XLA's.
    assert scan("l.sh", "accelerate launch --multi_gpu --num_processes 8 x.py\n") == []


def test_accelerate_config_file_decides_the_mode(tmp_path):
    (tmp_path / "tpu.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: XLA\n"
    )
    (tmp_path / "pod.yaml").write_text("distributed_type: TPU\ntpu_use_cluster: true\n")
    (tmp_path / "gpu.yaml").write_text("distributed_type: MULTI_GPU\n")
    script = str(tmp_path / "run.sh")
    tpu = one(script, "accelerate launch --config_file tpu.yaml train.py\n")
    assert (tpu.processes, tpu.facts) == ("per-device", {"multiprocess"})
    # tpu_use_cluster: tpu_pod_launcher imports torch_xla.distributed.xla_dist.
    pod = one(script, "accelerate launch --config_file=pod.yaml train.py\n")
    assert (pod.runs, pod.module) == ("torch_xla.distributed.xla_dist", True)
    gpu = one(script, "accelerate launch --config_file gpu.yaml train.py\n")
    assert gpu.processes == "" and gpu.facts == frozenset()


def test_torchrun_keeps_its_process_count():
    assert one("t.sh", "torchrun --nproc-per-node=4 t.py --q\n").processes == "4"
    assert one("t.sh", "torchrun --nproc_per_node 8 t.py\n").processes == "8"
    assert one("t.sh", "torchrun t.py\n").processes == "1"


def test_gcloud_worker_all_command_is_read_as_a_script():
    launch = one(
        "pod.sh",
        "export LOCAL=1\n"
        "gcloud compute tpus tpu-vm ssh my-pod --zone z --worker=all \\\n"
        "  --command \"export XLA_USE_BF16=1; cd repo && PJRT_DEVICE=TPU python3 train.py --a 'b c'\"\n",
    )
    # reported where the python command starts, inside the continued --command string
    assert (launch.runs, launch.line, launch.argv) == ("train.py", 3, ("--a", "b c"))
    # The remote shell starts empty: the local export does not reach it; its own do.
    assert [name for name, _, _ in launch.env] == ["PJRT_DEVICE", "XLA_USE_BF16"]
    assert all(where == "pod.sh:2" for _, _, where in launch.env)


def test_documentation_blocks_are_marked():
    launch = one("README.md", "```bash\npython train.py --x 1\n```\n")
    assert launch.document and launch.line == 2 and launch.argv == ("--x", "1")


def test_shell_scripts_by_name_or_shebang():
    assert is_shell_script("run.sh", "") and is_shell_script("x.bash", "")
    assert is_shell_script("scripts/train", "#!/bin/bash\n")
    assert is_shell_script("scripts/train", "#!/usr/bin/env bash\nset -e\n")
    assert is_shell_script("scripts/train", "#! /bin/sh -e\n")
    assert not is_shell_script("scripts/train", "#!/usr/bin/env python3\n")
    assert not is_shell_script("scripts/train", "#!/bin/bashful\n")
    assert one("scripts/train", "#!/bin/sh\npython t.py\n").runs == "t.py"


@pytest.mark.parametrize(
    ("argv", "value"),
    [
        (("--num_cores", "8", "train.py"), "8"),
        (("--num_cores=8",), "8"),
        (("train.py", "--lr", "1"), None),
        (("--", "--num_cores", "8"), None),  # after `--`: not an option
        (
            ("--num_cores", "8", "x.py", "--num_cores", "1"),
            "8",
        ),  # the first: later ones are the script's
        (("--num_cores",), None),
        (("--num_cores_x", "2"), None),
    ],
)
def test_option_value_reads_as_argparse(argv, value):
    assert option_value(argv, "--num_cores") == value


def test_short_option_value():
    assert option_value(("-n8",), "-n") == "8"
    assert option_value(("-n", "8"), "-n") == "8"
