"""Every command line of the package says what each of its arguments does: `--help` is the reader's manual."""
import argparse
import importlib

import pytest

COMMANDS = ["transformer_lib.translate", "transformer_lib.evaluate", "transformer_lib.train", "transformer_lib.serve",
            "transformer_lib.book.cli"]


class _Built(Exception):
    def __init__(self, parser):
        self.parser = parser


def _parsers(parser):
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


@pytest.mark.parametrize("module", COMMANDS)
def test_every_argument_of_every_command_has_help(module, monkeypatch):
    def built(parser, *args, **kwargs):
        raise _Built(parser)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", built)
    with pytest.raises(_Built) as caught:
        importlib.import_module(module).main([])
    silent = [f"{prog}: {'/'.join(action.option_strings) or action.dest}"
              for prog, parser in _parsers(caught.value.parser) for action in parser._actions
              if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
              and not (action.help or "").strip()]
    assert silent == []
