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
