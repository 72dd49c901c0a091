# SPDX-License-Identifier: Apache-2.0
"""The stand-in for devstack's ``iniset``/``inicomment``: one option of an
INI file set (or commented out), everything else in the file kept."""

import configparser
import os
import sys


def _read(path):
    parser = configparser.ConfigParser(interpolation=None,
                                       default_section="\0none")
    parser.optionxform = str
    if os.path.exists(path):
        parser.read(path)
    return parser


def main(action, path, section, option, value=None):
    parser = _read(path)
    if action == "set":
        if not parser.has_section(section):
            parser.add_section(section)
        parser.set(section, option, value)
    elif parser.has_section(section):
        parser.remove_option(section, option)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        parser.write(f)


if __name__ == "__main__":
    main(*sys.argv[1:])
