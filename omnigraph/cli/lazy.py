"""Click groups whose subcommands are imported on first use, so a console script starts fast.

A :class:`LazyGroup` holds, for each lazy subcommand, a :class:`LazyCommand`: where the command
is built (``"package.module:attribute"``) and the one-line help the group's ``--help`` lists.
``--help`` of the group, a usage error and a mistyped command name read only that table;
invoking a subcommand (or its ``--help``, or completing inside it) imports its module and no
other. Commands added the ordinary way (``@group.command``) sit beside the lazy ones.

The table's help must be the first sentence of the command's own help, so that the listing is the
one click would print with every command loaded; ``tests/guards/test_startup_imports.py`` compares
the two for every console script.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from gettext import gettext as _
from typing import Any

import click


@dataclass(frozen=True)
class LazyCommand:
    """Where a lazy subcommand is built and what ``--help`` of its group says of it.

    ``target`` is ``"package.module:attribute"``. Without ``args`` the attribute is the
    :class:`click.Command` itself; with ``args`` it is a factory called as ``attribute(*args)``
    (a command built for one program profile). ``short_help`` is the command's one-line help as
    its group lists it: the first sentence of the command's help text.
    """

    target: str
    short_help: str
    args: tuple[str, ...] = ()

    def load(self) -> click.Command:
        """Import the target's module and return the command (a TypeError if it is none)."""
        module_name, _, attribute = self.target.partition(":")
        found: Any = getattr(importlib.import_module(module_name), attribute)
        command = found(*self.args) if self.args else found
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is not a click command (got {type(command).__name__})")
        return command


class LazyGroup(click.Group):
    """A :class:`click.Group` that imports each of its ``lazy_commands`` when it is first looked up.

    Contract: :meth:`list_commands` names every command, loaded or not, sorted as click sorts
    them; :meth:`get_command` loads a lazy command once and keeps it in :attr:`commands` (a
    command whose name differs from its key is an error); :meth:`format_commands` lists the lazy
    commands not yet loaded by their :attr:`LazyCommand.short_help`, shortened to the width as
    click shortens any help, so the listing needs no import.
    """

    def __init__(self, *args: Any, lazy_commands: Mapping[str, LazyCommand] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands: dict[str, LazyCommand] = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, loaded or lazy, sorted."""
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name`` (a lazy one loaded and kept on first lookup), or None if there is none."""
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            command = self.lazy_commands[cmd_name].load()
            if command.name != cmd_name:
                raise RuntimeError(f"{self.lazy_commands[cmd_name].target} is named {command.name!r}, not {cmd_name!r}")
            self.add_command(command)
        return self.commands.get(cmd_name)

    def _listed(self, name: str) -> click.Command | None:
        """The command as the listing shows it: the loaded one, else a stand-in with the table's help."""
        if name in self.commands:
            return self.commands[name]
        lazy = self.lazy_commands.get(name)
        return None if lazy is None else click.Command(name, help=lazy.short_help)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The "Commands" section, as :meth:`click.Group.format_commands` writes it."""
        commands = [(name, command) for name in self.list_commands(ctx) if (command := self._listed(name)) is not None]
        commands = [(name, command) for name, command in commands if not command.hidden]
        if not commands:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in commands)
        rows = [(name, command.get_short_help_str(limit)) for name, command in commands]
        with formatter.section(_("Commands")):
            formatter.write_dl(rows)
