import pytest
import torch

from transformer_lib.runtime import default_device, run_budget, seed_everything


def test_budget_comes_from_argument_then_environment(monkeypatch):
    monkeypatch.setenv("BOOK_BUDGET", "cpu")
    assert run_budget() == "cpu"
    assert run_budget("full") == "full"
    monkeypatch.delenv("BOOK_BUDGET")
    monkeypatch.chdir("/")  # no book.yml above: auto
    assert run_budget() == ("full" if torch.cuda.is_available() else "cpu")


def test_unknown_budget_names_its_source(monkeypatch):
    monkeypatch.setenv("BOOK_BUDGET", "huge")
    with pytest.raises(ValueError, match=r"\$BOOK_BUDGET='huge' is not a run budget"):
        run_budget()


def test_a_default_budget_of_the_wrong_type_in_book_yml_names_it(monkeypatch, tmp_path):
    monkeypatch.delenv("BOOK_BUDGET", raising=False)
    (tmp_path / "book.yml").write_text("default_budget: [cpu]\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"book.yml default_budget=\['cpu'\] is not a run budget"):
        run_budget()


def test_default_device_is_usable():
    assert torch.zeros(1, device=default_device()).device.type == default_device().type


def test_seed_everything_repeats_random_numbers():
    seed_everything(3)
    a = torch.rand(4)
    seed_everything(3)
    assert torch.equal(a, torch.rand(4))
    with pytest.raises(TypeError, match="seed"):
        seed_everything(1.5)


def test_torch_threads_sets_and_restores_the_thread_count():
    import torch

    from transformer_lib.runtime import torch_threads

    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(1):
        raise RuntimeError("the body failed")
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="n must be a positive int"):
        with torch_threads(0):
            pass


def test_free_threads_leaves_the_cores_others_keep_busy():
    from transformer_lib.runtime import free_threads

    assert free_threads(2, 0.0, 2) == 2  # idle: torch's own choice
    assert free_threads(2, 0.3, 2) == 2  # a little background work changes nothing
    assert free_threads(2, 1.0, 2) == 1  # two busy processes get a core between them beside our two threads
    assert free_threads(2, 1.4, 2) == 1
    assert free_threads(2, 5.0, 2) == 1  # never fewer than one
    assert free_threads(16, 4.0, 8) == 8  # never more than torch chose on an idle machine
    assert free_threads(16, 10.0, 16) == 6


class _FakeMachine:
    """Busy seconds of the whole machine and of this process, advanced by hand, and a clock."""

    def __init__(self):
        self.now, self.all, self.mine = 0.0, 0.0, 0.0

    def run(self, seconds, mine, others):
        self.now += seconds
        self.mine += mine * seconds
        self.all += (mine + others) * seconds


def test_core_share_follows_other_processes_after_two_samples_that_agree():
    from transformer_lib.runtime import _CoreShare

    m = _FakeMachine()
    share = _CoreShare(2, busy=lambda cpus: m.all, own=lambda: m.mine, clock=lambda: m.now)
    share.cpus = [0, 1]
    before = torch.get_num_threads()
    try:
        m.run(1, mine=2.0, others=0.0)
        assert share.observe() == 2 and share.others == 0.0
        m.run(1, mine=1.0, others=1.0)  # two busy processes appear: one sample is not enough
        assert share.observe() == 2 and share.others == pytest.approx(1.0)
        m.run(1, mine=0.7, others=1.3)
        assert share.observe() == 1
        share.apply()  # what the hooks call, on the thread that runs torch
        assert torch.get_num_threads() == 1
        m.run(1, mine=1.0, others=0.0)  # they stop
        assert share.observe() == 1
        m.run(1, mine=2.0, others=0.05)
        assert share.observe() == 2
        share.apply()
        assert torch.get_num_threads() == 2
        m.run(1, mine=1.0, others=0.0)
        share.busy = lambda cpus: None  # the machine can no longer be read: keep what was wanted
        assert share.observe() == 2
    finally:
        torch.set_num_threads(before)


def test_share_cores_sets_threads_at_each_optimizer_step_and_stops_cleanly(monkeypatch):
    from transformer_lib import runtime

    if runtime.busy_seconds([0]) is None:
        pytest.skip("this machine has no /proc/stat to measure")  # not a failure hidden: share_cores returns False there
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    assert runtime.share_cores(every=60.0) is True
    try:
        assert runtime.share_cores() is True  # a second call keeps the first
        runtime._SHARING.wanted = 1  # as if other processes had kept the cores busy
        model = torch.nn.Linear(2, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.ones(2)).sum().backward()
        optimizer.step()
        assert torch.get_num_threads() == 1
    finally:
        assert runtime.share_cores(on=False) is False
    assert runtime._SHARING is None and torch.get_num_threads() == before
    optimizer.step()  # the hook is gone
    assert torch.get_num_threads() == before


def test_share_cores_leaves_a_thread_count_fixed_by_omp_num_threads(monkeypatch):
    from transformer_lib import runtime

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert runtime.share_cores() is False and runtime._SHARING is None
    with pytest.raises(ValueError, match="every must be a positive number of seconds"):
        runtime.share_cores(every=0)


def test_process_seconds_reads_this_process_cpu_time():
    import os
    import time

    from transformer_lib import runtime

    if runtime.process_seconds(os.getpid()) is None:
        pytest.skip("this machine has no /proc to measure")
    before = runtime.process_seconds(os.getpid())
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    assert runtime.process_seconds(os.getpid()) - before >= 0.2
    assert runtime.process_seconds(2**22 + 12345) is None  # no such process


@pytest.mark.parametrize("text, message", [
    ("default_budget: [unclosed\n", r"book.yml cannot be read for its default_budget at line 2 \(ParserError\)"),
    ("- cpu\n- full\n", r"book.yml is a list, not a mapping with a default_budget"),
    ("\xff\xfe", r"book.yml cannot be read for its default_budget \(UnicodeDecodeError\)"),
])
def test_a_malformed_or_list_shaped_book_yml_is_one_line_naming_it(monkeypatch, tmp_path, text, message):
    monkeypatch.delenv("BOOK_BUDGET", raising=False)
    (tmp_path / "book.yml").write_bytes(text.encode("latin-1"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=message) as err:
        run_budget()
    assert "\n" not in str(err.value) and "$BOOK_BUDGET" in str(err.value)


def test_share_cores_in_command_sets_threads_before_each_forward_pass_and_obeys_its_switch(monkeypatch):
    from transformer_lib import runtime

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(runtime, "busy_seconds", lambda cpus: 0.0)  # a machine that can be measured, anywhere
    before = torch.get_num_threads()
    for off in ("0", "off", "No"):
        monkeypatch.setenv(runtime.SHARE_ENV, off)
        assert runtime.share_cores_in_command() is False and runtime._SHARING is None
    monkeypatch.setenv(runtime.SHARE_ENV, "maybe")
    with pytest.raises(SystemExit, match=r"\$BOOK_SHARE_CORES='maybe': use 1 .* or 0"):
        runtime.share_cores_in_command()
    monkeypatch.setenv("WORLD_SIZE", "2")  # torchrun's processes divide the cores themselves
    monkeypatch.delenv(runtime.SHARE_ENV)
    assert runtime.share_cores_in_command() is False
    monkeypatch.delenv("WORLD_SIZE")
    assert runtime.share_cores_in_command() is True
    try:
        runtime._SHARING.wanted = 1  # as if other processes kept the cores busy
        with torch.no_grad():
            torch.nn.Linear(2, 2)(torch.ones(2))  # translating: no optimizer step, no Jupyter cell
        assert torch.get_num_threads() == 1
    finally:
        runtime.share_cores(on=False)
    assert torch.get_num_threads() == before
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # a count the user fixed wins
    assert runtime.share_cores_in_command() is False


@pytest.mark.parametrize("module, argv", [  # arguments each command refuses at once, after it starts sharing
    ("train", ["copy", "--steps", "0"]), ("train", ["multi30k", "--epochs", "0"]), ("translate", ["--beam", "0", "x"]),
    ("evaluate", ["--beam", "0"]), ("serve", ["translate", "m", "x", "--threads", "0"])])
def test_every_command_starts_sharing_the_cores_in_main(monkeypatch, module, argv):
    import importlib

    from transformer_lib import runtime

    class Started(Exception):
        pass

    def started():
        raise Started  # stop the command here: what it would run next needs data, models, time

    monkeypatch.setattr(runtime, "share_cores_in_command", started)
    with pytest.raises(Started):
        importlib.import_module(f"transformer_lib.{module}").main(argv)
